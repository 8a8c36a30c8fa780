# attack: list the driver's own descriptors (Python runs inside the driver) for anything but its pipes, socket and /dev/null
# expect: no regular file, directory or foreign socket of the host; nothing beyond what the driver itself opened
# status: ok
import os, stat, sys
bad = []
for fd in range(0, 4096):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    kind = stat.S_IFMT(st.st_mode)
    if kind in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFBLK):
        bad.append((fd, oct(st.st_mode)))
    if stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) not in ((1, 3), (1, 5), (1, 8), (1, 9)):
        bad.append((fd, 'char device', os.major(st.st_rdev), os.minor(st.st_rdev)))
if bad:
    print('ESCAPE: unexpected descriptors', bad, file=sys.stderr)
else:
    print('CONTAINED: no file, directory or device descriptor', file=sys.stderr)

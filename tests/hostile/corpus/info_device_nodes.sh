# attack: look for device nodes beyond null/zero/full/random/urandom: disks, /dev/mem, ttys, kvm, fuse, net/tun; and in /dev/pts for a pty of the host or of another sandbox
# expect: /dev holds only the five nodes (and shm, fd links, ptmx -> pts/ptmx); /dev/pts is an instance of the sandbox's own (only ptmx in it); making a device node is refused
# status: ok
extra=$(ls -A /dev | grep -v -x -e null -e zero -e full -e random -e urandom -e shm -e fd -e stdin -e stdout -e stderr -e pts -e ptmx)
bad=""
[ -n "$extra" ] && bad="$bad extra:$extra"
[ "$(readlink /dev/ptmx)" = "pts/ptmx" ] || bad="$bad ptmx:$(readlink /dev/ptmx)"
pts=$(ls -A /dev/pts)
[ "$pts" = "ptmx" ] || bad="$bad pts:$pts"
mknod /tmp/mem c 1 1 2>/dev/null && bad="$bad mknod-mem"
mknod /tmp/sda b 8 0 2>/dev/null && bad="$bad mknod-sda"
mknod /tmp/pts c 136 0 2>/dev/null && bad="$bad mknod-pts"
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: five device nodes and a private devpts" >&2; fi

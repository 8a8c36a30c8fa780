# attack: look for device nodes beyond null/zero/full/random/urandom: disks, /dev/mem, ttys, kvm, fuse, net/tun
# expect: /dev holds only the five nodes (and shm, fd links); making a device node is refused
# status: ok
extra=$(ls -A /dev | grep -v -x -e null -e zero -e full -e random -e urandom -e shm -e fd -e stdin -e stdout -e stderr)
bad=""
[ -n "$extra" ] && bad="$bad extra:$extra"
mknod /tmp/mem c 1 1 2>/dev/null && bad="$bad mknod-mem"
mknod /tmp/sda b 8 0 2>/dev/null && bad="$bad mknod-sda"
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: five device nodes" >&2; fi

# attack: reach /sys (cgroupfs, block devices, firmware, dmi ids)
# expect: no /sys at all, and mounting one is refused
# status: ok
bad=""
for p in /sys /sys/fs/cgroup /sys/class/dmi/id/product_uuid /sys/firmware /sys/kernel/debug; do
  [ -e "$p" ] && bad="$bad $p"
done
mkdir -p /tmp/sys && mount -t sysfs sysfs /tmp/sys 2>/dev/null && bad="$bad mounted-sysfs"
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: no sysfs" >&2; fi

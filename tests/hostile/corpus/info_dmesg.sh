# attack: read the kernel log: dmesg, /dev/kmsg, /proc/kmsg
# expect: dmesg fails (syslog is denied), /dev/kmsg does not exist, /proc/kmsg is masked (empty)
# status: ok
bad=""
out=$(dmesg 2>/dev/null | head -3); [ -n "$out" ] && bad="$bad dmesg:$out"
[ -e /dev/kmsg ] && bad="$bad /dev/kmsg"
out=$(timeout 2 head -c 200 /proc/kmsg 2>/dev/null); [ -n "$out" ] && bad="$bad /proc/kmsg:$out"
if [ -n "$bad" ]; then echo "ESCAPE: kernel log readable:$bad" >&2; else echo "CONTAINED: no kernel log" >&2; fi

# attack: binaries with file capabilities (ping's cap_net_raw, ...): copy the xattr or run them for a raw socket
# expect: no_new_privs ignores file capabilities; a raw ICMP socket is still refused
# status: ok
bad=""
caps=$(getcap -r /usr 2>/dev/null | head -20)
if command -v ping >/dev/null; then
  ping -c 1 -W 1 127.0.0.1 >/dev/null 2>&1 && bad="$bad ping-works"
fi
/usr/bin/python3 - <<'PY' || bad="$bad rawsock"
import socket, sys
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sys.exit(1)
except OSError:
    pass
PY
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: file capabilities give nothing [$caps]" >&2; fi

# attack: run the setuid/setgid binaries of /usr (su, mount, passwd, newuidmap, ...) hoping for euid 0
# expect: no_new_privs and the nosuid binds: none gains a privilege; id -u stays 1000
# status: ok
# limits: timeout=40
bad=""
list=$(find /usr/bin /usr/sbin -xdev -perm /6000 -type f 2>/dev/null | head -12)
for b in $list /usr/bin/su /usr/bin/newuidmap /usr/bin/passwd /usr/bin/mount; do
  [ -x "$b" ] || continue
  u=$(timeout 2 "$b" -c 'id -u' root </dev/null 2>/dev/null)
  [ "$u" = "0" ] && bad="$bad $b"
done
[ "$(id -u)" = "1000" ] || bad="$bad uid=$(id -u)"
grep -q '^NoNewPrivs:.*1' /proc/self/status || bad="$bad no-nnp"
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: $(echo $list | wc -w) setuid/setgid binaries, none elevates" >&2; fi

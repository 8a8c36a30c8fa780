# attack: write to /usr and the interpreter from bash: append to python3, create files in /usr/bin and /usr/lib, touch, chmod, ln, rm
# expect: all fail (read-only bind + Landlock); the host checks python3 and bash unchanged
# status: ok
bad=""
py=$(readlink -f /usr/bin/python3)
{ echo pwn >> "$py"; } 2>/dev/null && bad="$bad append-python"
touch /usr/bin/pwned 2>/dev/null && bad="$bad touch-usr-bin"
cp /bin/sh /usr/lib/pwned 2>/dev/null && bad="$bad cp-usr-lib"
chmod 4777 /usr/bin/env 2>/dev/null && bad="$bad chmod"
ln -s /tmp/x /usr/local/bin/python3 2>/dev/null && bad="$bad symlink"
rm -f /usr/bin/tail 2>/dev/null; [ -e /usr/bin/tail ] || bad="$bad rm"
truncate -s 0 /etc/ld.so.cache 2>/dev/null && bad="$bad truncate-ldcache"
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: /usr is read-only" >&2; fi

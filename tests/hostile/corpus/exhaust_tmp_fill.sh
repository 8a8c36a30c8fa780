# attack: fill the /tmp tmpfs
# expect: the write stops with ENOSPC (tmpfs size) or EFBIG (RLIMIT_FSIZE); the host's /tmp is untouched
# status: ok
# limits: memory=512 disk=32 timeout=20
err=$(dd if=/dev/zero of=/tmp/fill bs=1M count=100000 2>&1 >/dev/null) && echo "ESCAPE: wrote 100 GB to /tmp" >&2
echo "$err" | tail -3 >&2
case "$err" in
  *"No space left"*|*"File too large"*) echo "CONTAINED: /tmp is full at $(stat -c %s /tmp/fill) bytes" >&2 ;;
esac
rm -f /tmp/fill

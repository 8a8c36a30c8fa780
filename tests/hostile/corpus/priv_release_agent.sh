# attack: the cgroup v1 release_agent escape: mount a cgroup v1 hierarchy, set notify_on_release and release_agent to our script
# expect: no cgroupfs visible and mounting one is refused; no release_agent reachable anywhere
# status: ok
# limits: timeout=30
bad=""
mkdir -p /tmp/cg
for c in memory rdma pids cpu; do
  if mount -t cgroup -o $c cgroup /tmp/cg 2>/dev/null; then bad="$bad mounted-$c"; fi
done
mount -t cgroup2 none /tmp/cg 2>/dev/null && bad="$bad mounted-cgroup2"
ra=$(find / -name release_agent -o -name notify_on_release 2>/dev/null | grep -v '^/proc/[0-9]' | head -3)
[ -n "$ra" ] && bad="$bad found:$ra"
for f in $ra; do [ -w "$f" ] && bad="$bad writable:$f"; done
if [ -n "$bad" ]; then echo "ESCAPE: $bad" >&2; else echo "CONTAINED: no cgroupfs, no release_agent" >&2; fi

# attack: look everywhere (find /) for the marker file the test placed in the host's /root and /tmp
# expect: not found: the host's /root and /tmp are not in the sandbox's root; find walks all of /usr (which grows with the packages installed), hence 30 s
# status: ok
# limits: timeout=30
hits=$(find / -xdev -name '*petri-hostile-marker*' 2>/dev/null; find / -name 'host-marker' 2>/dev/null | grep -v '^/proc')
if [ -n "$hits" ]; then echo "ESCAPE: $hits" >&2; else echo "CONTAINED: no marker anywhere" >&2; fi

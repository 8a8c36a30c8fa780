# attack: kill -9 -1 (every process the sandbox user may signal), then kill pid 1
# expect: only the sandbox's own processes die (the driver included: status error/killed); the daemon and the neighbour live on
# status: ok error killed
# marker: -
echo "killing everything I can" >&2
kill -9 1 2>/dev/null
kill -9 -1
sleep 1

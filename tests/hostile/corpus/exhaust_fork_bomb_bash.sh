# attack: the classic bash fork bomb :(){ :|:& };:
# expect: the pids limit holds; the run ends by timeout; nothing outlives it
# status: timeout killed error ok
# limits: timeout=3 pids=48
# marker: -
echo "starting the bomb" >&2
:(){ :|:& };:
sleep 60

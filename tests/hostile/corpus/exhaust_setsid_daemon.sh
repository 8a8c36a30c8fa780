# attack: setsid + nohup + disown a sleeping daemon with its output closed, and exit 0
# expect: the execution ends (ok); the daemon dies with the run or the session
# status: ok
setsid nohup sleep 100000 </dev/null >/dev/null 2>&1 &
disown
setsid bash -c 'exec -a hidden-daemon sleep 100000' </dev/null >/dev/null 2>&1 &
disown
echo "CONTAINED: daemons started" >&2

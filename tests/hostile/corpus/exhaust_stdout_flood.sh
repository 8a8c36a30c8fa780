# attack: flood stdout (200 MB) to make the daemon read and drop it
# expect: petri keeps the output cap and 4 MiB past it, then stops reading: the writer blocks and is interrupted (a one-shot killed), with the output limit as the reason; the daemon's CPU and memory stay bounded
# status: timeout
# truncated: stdout
# limits: timeout=30
echo "CONTAINED: flooding stdout" >&2
yes 'flood flood flood flood flood flood flood flood' | head -c 200000000

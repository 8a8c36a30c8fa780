# attack: flood stdout (200 MB)
# expect: petri keeps the output cap, drains the rest, marks stdout truncated; the daemon's memory stays bounded
# status: ok
# truncated: stdout
# limits: timeout=30
yes 'flood flood flood flood flood flood flood flood' | head -c 200000000
echo "CONTAINED: the flood was written" >&2

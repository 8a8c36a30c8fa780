# attack: sleep far past the timeout
# expect: status timeout after the wall-clock limit; the sleeping process is gone afterwards
# status: timeout
# limits: timeout=2
echo "CONTAINED: going to sleep" >&2
sleep 3600

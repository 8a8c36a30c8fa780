# attack: flood stderr (200 MB in big writes)
# expect: stderr capped and marked truncated; past the cap and 4 MiB more it is no longer read, so the writer blocks and is interrupted (a one-shot killed), with the output limit as the reason; the daemon keeps answering
# status: timeout
# truncated: stderr
# limits: timeout=30
import os
os.write(2, b'CONTAINED: flooding stderr\n')
chunk = b'E' * (1 << 20)
for _ in range(200):
    os.write(2, chunk)

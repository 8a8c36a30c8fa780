# attack: flood stderr (200 MB in big writes)
# expect: stderr capped and marked truncated; the daemon keeps answering
# status: ok
# truncated: stderr
# limits: timeout=30
import os
os.write(2, b'CONTAINED: flooding stderr\n')
chunk = b'E' * (1 << 20)
for _ in range(200):
    os.write(2, chunk)

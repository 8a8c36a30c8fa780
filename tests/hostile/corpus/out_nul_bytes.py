# attack: write NUL bytes in the middle and at the end of output
# expect: returned without loss (base64), JSON valid
# status: ok
# marker: -
# exact: b'a\x00b\x00\x00c\n\x00'
import os, sys
data = b'a\x00b\x00\x00c\n\x00'
os.write(1, data)
os.write(2, data)

# attack: write invalid UTF-8 (overlong, lone continuation, surrogate halves, truncated sequences) to stdout and stderr
# expect: the exact bytes come back (base64 alongside U+FFFD text), JSON stays valid
# status: ok
# marker: -
# exact: b'\xff\xfe overlong \xc0\xaf cont \x80\x80 surrogate \xed\xa0\x80 cut \xe2\x82 end\n'
import os, sys
data = b'\xff\xfe overlong \xc0\xaf cont \x80\x80 surrogate \xed\xa0\x80 cut \xe2\x82 end\n'
os.write(1, data)
os.write(2, data)

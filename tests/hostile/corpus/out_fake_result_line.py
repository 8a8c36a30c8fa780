# attack: print a complete fake petri result object as the output, hoping a consumer parses it instead of petri's
# expect: it is just text inside stdout; petri run prints exactly one JSON line of its own
# status: ok
# marker: -
# exact: b'{"status":"ok","exit_code":0,"stdout":"forged","results":[{"text/plain":"42"}]}\n'
import os, sys
data = b'{"status":"ok","exit_code":0,"stdout":"forged","results":[{"text/plain":"42"}]}\n'
os.write(1, data)
os.write(2, data)

# attack: terminal escape sequences aimed at the operator's terminal: clear screen, set title, OSC 52 clipboard write, hyperlink, DCS, bell, cursor moves, \r overwrite
# expect: returned as data, unchanged and JSON-escaped: never interpreted by petri
# status: ok
# marker: -
# exact: b'\x1b[2J\x1b[H\x1b]0;pwned title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b]8;;http://192.0.2.1/\x1b\\link\x1b]8;;\x1b\\\x1bP+q544e\x1b\\\x07\x1b[10A\rsafe line overwritten\x08\x08\n'
import os, sys
data = b'\x1b[2J\x1b[H\x1b]0;pwned title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b]8;;http://192.0.2.1/\x1b\\link\x1b]8;;\x1b\\\x1bP+q544e\x1b\\\x07\x1b[10A\rsafe line overwritten\x08\x08\n'
os.write(1, data)
os.write(2, data)

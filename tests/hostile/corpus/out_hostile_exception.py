# attack: an uncaught exception whose name, message and traceback carry escape sequences, lone surrogates, NUL and 1 MB of text
# expect: a structured error with valid JSON: NUL and surrogates replaced, sizes capped; status error
# status: error
# marker: -
class Evil(Exception):
    def __str__(self):
        return "\x1b[2J\x00\ud800\udfff" + "M" * (1 << 20)
Evil.__name__ = "Evil\x1b]0;title\x07\ud800" + "N" * 5000
raise Evil()

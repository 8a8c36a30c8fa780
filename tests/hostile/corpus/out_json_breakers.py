# attack: output made to break JSON and HTML consumers: quotes, backslashes, </script>, U+2028/U+2029, a literal \u0000, control characters
# expect: returned unchanged; the JSON document stays valid
# status: ok
# marker: -
# exact: b'"\\"}]}\' </script><script>alert(1)</script> \xe2\x80\xa8\xe2\x80\xa9 \\u0000 \x01\x02\x1f\x7f {"status":"ok"}\n'
import os, sys
data = b'"\\"}]}\' </script><script>alert(1)</script> \xe2\x80\xa8\xe2\x80\xa9 \\u0000 \x01\x02\x1f\x7f {"status":"ok"}\n'
os.write(1, data)
os.write(2, data)

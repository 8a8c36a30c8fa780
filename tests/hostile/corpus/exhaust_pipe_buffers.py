# attack: fill as many pipe buffers as possible (kernel memory)
# expect: stops at EMFILE, or the pipe-buffer quota (pipe-user-pages-soft shrinks them), or the memory limit
# status: ok oom killed error
# limits: memory=128
import errno, fcntl, os, sys
pipes = []
filled = 0
try:
    while len(pipes) < 5000:
        r, w = os.pipe()
        pipes.append((r, w))
        os.set_blocking(w, False)
        try:
            fcntl.fcntl(w, 1031, 1 << 20)     # F_SETPIPE_SZ 1 MiB
        except OSError:
            pass
        try:
            while True:
                filled += os.write(w, b'\0' * 65536)
        except BlockingIOError:
            pass
    print('ESCAPE? 5000 pipes open', file=sys.stderr)
except OSError as e:
    print('CONTAINED: stopped at', len(pipes), 'pipes,', filled >> 20, 'MiB buffered:', e.strerror, file=sys.stderr)

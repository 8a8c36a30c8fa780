# attack: map a huge sparse region (1 TiB, MAP_NORESERVE) and touch it page by page
# expect: the mapping may exist, but touching it is charged: OOM kill or failure, never host memory
# status: oom killed error
# limits: memory=128 timeout=20
# marker: -
import ctypes, mmap, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
size = 1 << 40
addr = libc.mmap(None, size, 3, 0x22 | 0x4000, -1, 0)   # PRIVATE|ANONYMOUS|NORESERVE
if addr in (None, ctypes.c_void_p(-1).value):
    print('CONTAINED: the 1 TiB mapping was refused, errno', ctypes.get_errno(), file=sys.stderr)
    sys.exit(1)
print('mapped 1 TiB at', hex(addr), file=sys.stderr, flush=True)
for off in range(0, size, 4096):
    ctypes.c_char.from_address(addr + off).value = b'x'
    if off > (1 << 30):
        print('ESCAPE: touched 1 GiB of pages under a 128 MiB limit', file=sys.stderr, flush=True)
        break

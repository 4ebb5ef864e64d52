"""A file's pages in or out of the page cache, for the benchmarks' hot and cold
runs; imported from beside them by bench_python.py and bench_gpu.py (which
tools/device_bundle.sh carries with this file into the GPU bundle)."""

import os


def drop_cache(path):
    """Writes ``path`` back (fsync) and drops its pages (POSIX_FADV_DONTNEED)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path):
    """Reads ``path`` once, whole (16 MiB reads), which leaves it in the page cache."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass

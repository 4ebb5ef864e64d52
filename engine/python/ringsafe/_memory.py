"""Owned destination memory for loads whose bytes are copied in (the pread
backend, URLs, S3, file objects): one Arena per load, tensors as views of it."""

import os

from ._ringsafe import Arena

# Destinations of at least this many bytes come from an Arena; smaller ones
# from the framework's own allocator.
ARENA_MIN_BYTES = 2 << 20


# Huge pages for owned arenas: RINGSAFE_ARENA_PAGES=huge. The default is 4 KiB
# pages: fresh huge pages cost 0.4-1.3 GB/s to fault in on the 2-core VM
# (zeroing and compaction), 4 KiB pages 2.1 GB/s for the same load (README,
# "Python performance").
_HUGE = os.environ.get("RINGSAFE_ARENA_PAGES", "small").strip().lower() == "huge"


def new_arena(size):
    """A fresh Arena of ``size`` bytes, not prefaulted: the reads fault its
    pages in on every I/O thread at once."""
    return Arena(size, huge=_HUGE, prefault=False)

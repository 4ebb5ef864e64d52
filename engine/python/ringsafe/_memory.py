"""Owned destination memory for loads whose bytes are copied in (the pread
backend, URLs, S3, file objects): one Arena per load, tensors as views of it."""

from ._ringsafe import Arena

# Destinations of at least this many bytes come from an Arena; smaller ones
# from the framework's own allocator.
ARENA_MIN_BYTES = 2 << 20


def new_arena(size):
    """A fresh Arena of ``size`` bytes, not prefaulted: the reads fault its
    pages in on every I/O thread at once."""
    return Arena(size, prefault=False)

"""Owned destination memory for loads whose bytes are copied in (the pread
backend, URLs, S3, file objects): one Arena per load, tensors as views of it.
Arenas come from the process-wide arena cache and go back to it when their
last tensor is gone, so a process that loads again reuses pages it already
faulted in; the cache is bounded (RINGSAFE_ARENA_CACHE bytes, default
min(RAM / 8, 4 GiB); 0 disables it) and returns everything to the kernel
after 2 s without use (set_arena_cache)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._ringsafe import Arena
from ._ringsafe import arena_cache_stats as _arena_cache_stats
from ._ringsafe import set_arena_cache as _set_arena_cache
from ._ringsafe import trim_arena_cache as _trim_arena_cache

if TYPE_CHECKING:
    from ._typing import ArenaCacheStats

# Destinations of at least this many bytes come from an Arena; smaller ones
# from the framework's own allocator.
ARENA_MIN_BYTES = 2 << 20


# Huge pages for owned arenas: RINGSAFE_ARENA_PAGES=huge. The default is 4 KiB
# pages: fresh huge pages cost 0.4-1.3 GB/s to fault in on the 2-core VM
# (zeroing and compaction), 4 KiB pages 2.1 GB/s for the same load (README,
# "Python performance").
_HUGE = os.environ.get("RINGSAFE_ARENA_PAGES", "small").strip().lower() == "huge"


def new_arena(size: int) -> Arena:
    """An Arena of ``size`` bytes from the arena cache (contents stale: the
    caller overwrites what it exposes), or fresh and not prefaulted: the reads
    fault its pages in on every I/O thread at once."""
    return Arena(size, huge=_HUGE, recycle=True)


def arena_cache_stats() -> ArenaCacheStats:
    """{cached_bytes, buffers, hits, misses, released, limit, idle_seconds} of the arena cache."""
    return _arena_cache_stats()


def set_arena_cache(limit: int | None = None, idle_seconds: float | None = None) -> None:
    """Sets the arena cache's limit in bytes (0 disables it and frees what it
    holds) and/or how long it stays unused before it is returned to the kernel."""
    _set_arena_cache(limit, idle_seconds)


def trim_arena_cache() -> None:
    """Returns every cached arena to the kernel now."""
    _trim_arena_cache()

"""Owned destination memory for loads whose bytes are copied in (the pread
backend, URLs, S3, file objects): one Arena per load, tensors as views of it.
Arenas come from the process-wide arena cache and go back to it when their
last tensor is gone, so a process that loads again reuses pages it already
faulted in; the cache is bounded (RINGSAFE_ARENA_CACHE bytes, default
min(RAM / 8, 4 GiB); 0 disables it) and returns everything to the kernel
after 2 s without use (set_arena_cache). Also where tensors go in an arena:
packed (each start 64-byte aligned) or as the file's data section holds them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._ringsafe import Arena
from ._ringsafe import arena_cache_stats as _arena_cache_stats
from ._ringsafe import set_arena_cache as _set_arena_cache
from ._ringsafe import trim_arena_cache as _trim_arena_cache

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ._ringsafe import TensorInfo
    from ._typing import ArenaCacheStats

# Destinations of at least this many bytes come from an Arena; smaller ones
# from the framework's own allocator.
ARENA_MIN_BYTES = 2 << 20


# Huge pages for owned arenas: RINGSAFE_ARENA_PAGES=huge. The default is 4 KiB
# pages: fresh huge pages are slower to fault in (zeroing and compaction;
# bench/README.md, "Python loads: where the thresholds come from").
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


ALIGNMENT = 64  # every tensor of a packed arena starts on a 64-byte boundary


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of ALIGNMENT."""
    return -(-n // ALIGNMENT) * ALIGNMENT


@dataclass(frozen=True)
class ViewItem:
    """One tensor to view in a buffer (what adapter.views() takes): tensor
    ``name``'s ``nbytes`` bytes at ``offset``, as ``dtype`` (the safetensors
    code) of ``shape`` (the file's)."""

    name: str
    offset: int
    dtype: str
    shape: Sequence[int]
    nbytes: int


def packed_items(by_name: Mapping[str, TensorInfo], names: Sequence[str], offsets: Sequence[int]) -> list[ViewItem]:
    """The ViewItems of ``names`` (TensorInfo in ``by_name``) placed at ``offsets``."""
    return [ViewItem(n, off, by_name[n].dtype, by_name[n].shape, by_name[n].nbytes) for n, off in zip(names, offsets)]


@dataclass(frozen=True)
class ArenaLayout:
    """Tensors placed in one new arena: ``arena``, and ``offsets``, where each
    tensor starts in it, in the order the tensors were given."""

    arena: Arena
    offsets: Sequence[int]


def file_layout_arena(infos: Sequence[TensorInfo], selected_bytes: int) -> ArenaLayout | None:
    """The ArenaLayout placing each tensor (TensorInfo) at its offset in the
    file's data section, relative to a 4096-aligned base, when the tensors are
    in one shard and cover at least 90 % of their span; None otherwise."""
    if not infos or len({t.shard for t in infos}) != 1:
        return None
    lo = min(t.begin for t in infos) // 4096 * 4096
    hi = max(t.end for t in infos)
    if selected_bytes < 0.9 * (hi - lo):
        return None
    return ArenaLayout(new_arena(hi - lo), [t.begin - lo for t in infos])


def new_packed_arena(sizes: Iterable[int]) -> ArenaLayout:
    """The ArenaLayout of tensors of ``sizes`` bytes each, every start ALIGNMENT-aligned."""
    offsets, size = [], 0
    for n in sizes:
        size = aligned(size)
        offsets.append(size)
        size += n
    return ArenaLayout(new_arena(size), offsets)

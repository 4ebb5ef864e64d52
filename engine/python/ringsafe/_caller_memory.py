"""Loads into memory the caller already holds (load_model into host
parameters, read_into): how they read a local checkpoint, from what the page
cache holds of it. Cached: copied out of a mapping (mapped_when_hot); cold:
read with O_DIRECT (direct_when_cold); in between, small, remote, or with
direct= chosen: read with the reader as opened. mapped_or_read makes the
choice and returns it (a CallerMemoryRead) for the loads to follow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ._errors import SafetensorError, error
from ._mapped import checked_mapping
from ._ringsafe import MappedFile, Reader
from ._source import open_reader

if TYPE_CHECKING:
    from ._typing import ReaderOptions


def _compare_checkpoints(a, b):
    """How what reader ``b`` opened compares with what ``a`` opened (by the same
    path): "same" (every shard's identity, size, modification time and
    header), "replaced" (another file is at a path now: ``a`` still holds the
    one it parsed) or the spec of a shard rewritten in place (same identity,
    another size, time or header: neither reader reads what ``a`` parsed)."""
    shards, others = a.shards(), b.shards()
    if len(shards) != len(others):
        return "replaced"
    changed = None
    for s, o in zip(shards, others):
        if not s.stat.same_file(o.stat):
            return "replaced"
        if s.stat != o.stat and changed is None:
            changed = s.spec
    if changed is None and (a.metadata() != b.metadata() or a.tensors() != b.tensors()):
        changed = shards[0].spec if len(shards) == 1 else a.spec  # a header differs, within one timestamp tick
    return changed or "same"


# Loads into memory the caller already holds (load_model into host parameters,
# read_into) read a cold local checkpoint with O_DIRECT: the disk's bytes go
# straight into that memory, with no page-cache pages to fill first and no
# copy out of them. Loads into fresh memory (load_file(backend="pread"),
# iter_tensors) stay buffered (O_DIRECT faults the fresh pages in on the
# submitting thread); so do safe_open handles (many small, repeated reads),
# device loads (staging windows are not placed at the file's alignment:
# O_DIRECT would bounce them) and every load under DIRECT_MIN_BYTES. The
# cost: processes loading one cold file at once each read it from the disk
# (buffered, they share the page cache); direct=False keeps the page cache.
# The measurements behind these choices: bench/README.md, "Python loads:
# where the thresholds come from".
COLD_FRACTION = 0.1
DIRECT_MIN_BYTES = 64 << 20


def _cold_local(reader, infos):
    """Whether every shard of ``reader`` is a local file, the tensors
    ``infos`` (TensorInfo records) come to DIRECT_MIN_BYTES or more, and
    less than COLD_FRACTION of their bytes is in the page cache."""
    if not all(reader.shard_file(i) for i in range(len(reader.shards()))):
        return False  # a URL
    ranges = file_ranges(reader, infos)  # adjacent tensors merged: one mincore each
    total = sum(n for rs in ranges.values() for _, n in rs)
    if total < DIRECT_MIN_BYTES:
        return False
    resident = 0
    shards = reader.shards()
    for shard, rs in ranges.items():
        m = MappedFile(reader.shard_file(shard))
        if m.stat != shards[shard].stat:
            return False  # replaced or rewritten since the reader opened it: leave it to the reader
        resident += sum(m.resident(off, n) for off, n in rs)
    return resident < COLD_FRACTION * total


def direct_when_cold(reader, filename, options, infos):
    """``reader``, or in its place (closing it) one opened with direct=True
    when the checkpoint is local, the tensors ``infos`` (TensorInfo
    records) are cold (see above) and the caller did not choose ``direct``.
    The second open is by path, and used only when it opened the checkpoint
    ``reader`` parsed: when another file was renamed over it, ``reader`` is
    kept (its descriptors still hold the files it parsed); when one was
    rewritten in place, ObjectChanged."""
    if "direct" in options:
        return reader
    try:
        if not _cold_local(reader, infos):
            return reader
        direct = open_reader(filename, dict(options, direct=True))
    except (OSError, SafetensorError):  # no O_DIRECT on this filesystem, or gone: stay buffered
        return reader
    verdict = _compare_checkpoints(reader, direct)
    if verdict != "same":
        direct.close()
        if verdict == "replaced":
            return reader
        raise error("ObjectChanged", f"{verdict} was rewritten in place while it was being loaded (its size, "
                                     f"modification time or header changed since its header was read)")
    reader.close()
    return direct


# And they copy a checkpoint whose selected bytes are in the page cache out of
# a mapping of it (MappedFile.copy_to: a copy with non-temporal stores from
# the mapping on every core, the GIL released; a piece that is not cached is
# read in first) instead of reading it: the kernel's copy into the caller's
# pages (pread, io_uring) runs at the speed of an ordinary memcpy, and the
# cached file's folios map cheaply. Not with direct=True, nor for
# load_model(backend="pread"), which never map the file (a file truncated in
# place while a mapping is copied from raises SIGBUS, as the reference's mmap
# loads do). Nor under COPY_MIN_BYTES, where mapping, asking the page cache
# and unmapping cost more than reading (bench/README.md, same section).
HOT_FRACTION = 0.9
COPY_MIN_BYTES = 16 << 20


def file_ranges(reader, infos):
    """{shard: [(file offset, length)]} of the tensors ``infos`` (TensorInfo),
    in file order, adjacent ones merged, empty ones left out."""
    shards = reader.shards()
    ranges: dict[int, list[tuple[int, int]]] = {}
    for t in sorted(infos, key=lambda t: (t.shard, t.begin)):
        rs = ranges.setdefault(t.shard, [])
        off = shards[t.shard].data_start + t.begin
        if rs and rs[-1][0] + rs[-1][1] == off:
            rs[-1] = (rs[-1][0], rs[-1][1] + t.nbytes)
        elif t.nbytes:
            rs.append((off, t.nbytes))
    return ranges


def mapped_when_hot(reader, options, infos):
    """{shard: MappedFile} of the shards holding the tensors ``infos``
    (TensorInfo records), mapped, when every one is a local file that is
    still the one the reader opened, the caller did not ask for O_DIRECT, the
    tensors come to COPY_MIN_BYTES or more and at least HOT_FRACTION of their
    bytes are in the page cache; else None (the loads read them, see
    direct_when_cold). The mappings pass checked_mapping's checks (a shard
    rewritten in place since the reader parsed it raises ObjectChanged)."""
    if options.get("direct"):
        return None
    ranges = file_ranges(reader, infos)
    total = sum(n for rs in ranges.values() for _, n in rs)
    if total < max(COPY_MIN_BYTES, 1):
        return None
    files = {shard: reader.shard_file(shard) for shard in ranges}
    if not all(files.values()):
        return None  # read over the network
    maps, resident = {}, 0
    shards = reader.shards()
    for shard, rs in ranges.items():
        try:
            m = MappedFile(files[shard])  # the local file (an hf:// shard's: the Hub cache's)
        except (OSError, SafetensorError):
            return None  # gone, or not mappable: the reader has it open
        if not m.stat.same_file(shards[shard].stat):
            return None  # another file at the path: the reader reads the one it parsed
        resident += sum(m.resident(off, n) for off, n in rs)
        maps[shard] = m
    if resident < HOT_FRACTION * total:
        return None
    # Copied from: checked as the mmap backend checks (a rewrite in place or
    # another header raises ObjectChanged).
    return {shard: checked_mapping(reader, shard, m) for shard, m in maps.items()}


@dataclass(frozen=True)
class CallerMemoryRead:
    """How a load into memory the caller holds reads its tensors (mapped_or_read's
    decision): ``how`` is "mapped" (copied from ``maps``, {shard: MappedFile},
    into ``views``, the destinations' byte buffers), "direct" (read with
    ``reader``, reopened with O_DIRECT in place of the one given, which is
    closed) or "reader" (read with ``reader``, the one given)."""

    how: Literal["mapped", "direct", "reader"]
    reader: Reader
    maps: dict[int, MappedFile] | None = None
    views: list[Any] | None = None


def mapped_or_read(reader: Reader, filename: Any, *, options: "ReaderOptions", infos: list[Any],
                   byte_views: Callable[[], list[Any] | None] | None = None) -> CallerMemoryRead:
    """How to load the tensors ``infos`` into memory the caller holds: from the
    mappings when they are cached (mapped_when_hot) and ``byte_views()``
    returns the destinations' byte buffers, else with the reader that
    direct_when_cold chooses. ``byte_views`` is called only when the tensors
    are cached; it returns None when some destination cannot be viewed, and
    None in its place never maps."""
    if byte_views is not None:
        maps = mapped_when_hot(reader, options, infos)
        views = byte_views() if maps is not None else None
        if views is not None:
            return CallerMemoryRead("mapped", reader, maps, views)
    chosen = direct_when_cold(reader, filename, options, infos)
    return CallerMemoryRead("direct" if chosen is not reader else "reader", chosen)


def byte_views(adapter, objs):
    """A callable for mapped_or_read: the adapter's byte_view of each of
    ``objs`` (described destinations), or None when one has none."""
    def views():
        out = [adapter.byte_view(o) for o in objs]
        return None if any(v is None for v in out) else out
    return views

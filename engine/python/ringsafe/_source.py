"""Where a load's bytes come from, behind one interface that safe_open and
load_file share; open_source() picks the source:

- MappedSource (_mapped.py): local files with backend="mmap" (the default):
  tensors are views of a private mapping, made resident in parallel first;
- EngineSource (_engine_source.py): backend="pread", URLs, s3:// and remote
  indexes: parallel io_uring / HTTP reads into owned memory;
- StreamSource (_stream.py): an open Python file object that is not an
  operating-system file (BytesIO, fsspec); one that is, is opened by path
  through /proc/self/fd.

A source knows its tensors as (name, dtype, shape, begin, end, shard) in data
order and hands out whole tensors (load, one) and boxes of one (box)."""

import collections
import io
import os
import stat

from ._dtypes import SafetensorError, error
from ._engine_source import EngineSource
from ._mapped import MappedSource
from ._paths import is_url, spec_of
from ._ringsafe import Reader
from ._stream import StreamSource

BACKENDS = ("mmap", "pread")


def check_backend(backend):
    """The backend name, checked as the reference checks it."""
    if not isinstance(backend, str):
        raise TypeError(f"argument 'backend': '{type(backend).__name__}' is not an instance of 'str'")
    if backend not in BACKENDS:
        raise error("InvalidArgument", f'backend "{backend}" is invalid (expected one of: "mmap", "pread")')
    return backend


def open_reader(filename, options):
    """A Reader for a path, URL or index, with the caller's Reader options."""
    return Reader(spec_of(filename), **options)


# Loads into memory the caller already holds (load_model into host parameters,
# read_into) read a cold local checkpoint with O_DIRECT: the disk's bytes go
# straight into that memory, with no page-cache pages to fill first (fresh
# memory, which on a VM with free page reporting also costs a host fault per
# page) and no copy out of them. Measured on the 2-core VM, 2.05 GiB cold,
# interleaved against direct=False: load_model 0.70-0.76 s against 0.86-1.22 s
# with only the file dropped from the page cache (4 of 4 rounds), medians 0.74
# and 0.77 s against 1.84 and 1.35 s after a global drop_caches (8 of 10).
# Loads into fresh memory (load_file(backend="pread"), iter_tensors) stay
# buffered: O_DIRECT faults the fresh pages in on the submitting thread, and
# with only the file dropped it lost (iter_tensors 1.69-1.78 s against
# 0.93-1.05 s; pread 3 of 4 rounds; two benchmark runs alike), though it won
# after a global drop_caches. So do safe_open handles (many small, repeated
# reads) and device loads (staging windows are not placed at the file's
# alignment: O_DIRECT would bounce them; not measured on a GPU), and every
# load under DIRECT_MIN_BYTES. The cost: processes loading one cold file at
# once each read it from the disk (buffered, they share the page cache);
# direct=False keeps the page cache.
COLD_FRACTION = 0.1
DIRECT_MIN_BYTES = 64 << 20


def _cold_local(reader, infos):
    """Whether every shard of ``reader`` is a local file, the tensors
    ``infos`` (reader.tensors() tuples) come to DIRECT_MIN_BYTES or more, and
    less than COLD_FRACTION of their bytes is in the page cache."""
    from ._ringsafe import MappedFile
    shards = reader.shards()
    if any(reader.shard_identity(i) == (0, 0) for i in range(len(shards))):
        return False  # a URL
    ranges = {}  # shard -> [(offset, length)], adjacent tensors merged (one mincore each)
    for _, _, _, begin, end, shard in sorted(infos, key=lambda t: (t[5], t[3])):
        rs = ranges.setdefault(shard, [])
        off = shards[shard][2] + begin
        if rs and rs[-1][0] + rs[-1][1] == off:
            rs[-1] = (rs[-1][0], rs[-1][1] + end - begin)
        elif end > begin:
            rs.append((off, end - begin))
    total = sum(n for rs in ranges.values() for _, n in rs)
    if total < DIRECT_MIN_BYTES:
        return False
    resident = 0
    for shard, rs in ranges.items():
        m = MappedFile(shards[shard][0])
        if m.identity != reader.shard_identity(shard) or m.size != shards[shard][1]:
            return False  # replaced since the reader opened it: leave it to the reader
        resident += sum(m.resident(off, n) for off, n in rs)
    return resident < COLD_FRACTION * total


def direct_when_cold(reader, filename, options, infos):
    """``reader``, or in its place (closing it) one opened with direct=True
    when the checkpoint is local, the tensors ``infos`` (reader.tensors()
    tuples) are cold (see above) and the caller did not choose ``direct``."""
    if "direct" in options:
        return reader
    try:
        if not _cold_local(reader, infos):
            return reader
        direct = open_reader(filename, dict(options, direct=True))
    except (OSError, SafetensorError):  # no O_DIRECT on this filesystem, or gone: stay buffered
        return reader
    reader.close()
    return direct


# And they copy a checkpoint whose selected bytes are in the page cache out of
# a mapping of it (MappedFile.copy_to: memcpy from the mapping on every core,
# the GIL released; a piece that is not cached is read in first) instead of
# reading it: the kernel's copy into the caller's pages (pread, io_uring)
# costs more CPU than a user-space copy from a mapping of the page cache's
# folios, and a cached file's large folios map by the 2 MiB. Measured on the
# 2-core VM, 2.2 GB hot (see bench/bench_python.py's load_model and read_into
# rows). Not with direct=True, nor for load_model(backend="pread"), which
# never map the file (a file truncated in place while a mapping is copied
# from raises SIGBUS, as the reference's mmap loads do). Nor under
# COPY_MIN_BYTES: mapping, asking the page cache and unmapping cost about
# 80 us more than an inline read of a 4 KiB tensor (26 us in all), which the
# faster copy wins back only from a few MiB on.
HOT_FRACTION = 0.9
COPY_MIN_BYTES = 8 << 20


def _file_ranges(reader, infos):
    """{shard: [(file offset, length)]} of the tensors ``infos``, adjacent ones merged."""
    shards = reader.shards()
    ranges = {}
    for _, _, _, begin, end, shard in sorted(infos, key=lambda t: (t[5], t[3])):
        rs = ranges.setdefault(shard, [])
        off = shards[shard][2] + begin
        if rs and rs[-1][0] + rs[-1][1] == off:
            rs[-1] = (rs[-1][0], rs[-1][1] + end - begin)
        elif end > begin:
            rs.append((off, end - begin))
    return ranges


def mapped_when_hot(reader, options, infos):
    """{shard: MappedFile} of the shards holding the tensors ``infos``
    (reader.tensors() tuples), mapped, when every one is a local file that is
    still the one the reader opened, the caller did not ask for O_DIRECT, the
    tensors come to COPY_MIN_BYTES or more and at least HOT_FRACTION of their
    bytes are in the page cache; else None (the loads read them, see
    direct_when_cold)."""
    from ._ringsafe import MappedFile
    if options.get("direct"):
        return None
    shards = reader.shards()
    ranges = _file_ranges(reader, infos)
    total = sum(n for rs in ranges.values() for _, n in rs)
    if total < max(COPY_MIN_BYTES, 1):
        return None
    maps, resident = {}, 0
    for shard, rs in ranges.items():
        identity = reader.shard_identity(shard)
        if identity == (0, 0):
            return None  # a URL
        try:
            m = MappedFile(shards[shard][0])
        except (OSError, SafetensorError):
            return None  # gone, or not mappable: the reader has it open
        if m.identity != identity or m.size != shards[shard][1]:
            return None  # replaced since the reader opened it
        resident += sum(m.resident(off, n) for off, n in rs)
        maps[shard] = m
    return maps if resident >= HOT_FRACTION * total else None


# How loads into caller memory went, counted per call (the tests read it):
# "mapped" copied from mappings, "direct" reopened with O_DIRECT, "reader" read
# with the reader as opened.
LOADS = collections.Counter()


def mapped_or_read(reader, filename, options, infos, byte_views=None):
    """(maps, views, reader) for a load of the tensors ``infos`` into memory
    the caller holds: the mappings to copy them from (mapped_when_hot), the
    destinations' byte buffers that ``byte_views()`` returns, and the reader
    as it was; or (None, None, the reader to read them with: direct_when_cold's).
    ``byte_views`` is called only when the tensors are cached; it returns None
    when some destination cannot be viewed, and None in its place never maps."""
    if byte_views is not None:
        maps = mapped_when_hot(reader, options, infos)
        views = byte_views() if maps is not None else None
        if views is not None:
            LOADS["mapped"] += 1
            return maps, views, reader
    chosen = direct_when_cold(reader, filename, options, infos)
    LOADS["direct" if chosen is not reader else "reader"] += 1
    return None, None, chosen


def byte_views(adapter, objs):
    """A callable for mapped_or_read: the adapter's byte_view of each of
    ``objs`` (described destinations), or None when one has none."""
    def views():
        out = [adapter.byte_view(o) for o in objs]
        return None if any(v is None for v in out) else out
    return views


def _os_file(f):
    """The descriptor of a file object backed by a regular operating-system file, else None."""
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None


def open_source(filename, backend, options):
    """The source for ``filename`` (a path, URL, index or binary file object)."""
    check_backend(backend)
    if not isinstance(filename, (str, os.PathLike)) and hasattr(filename, "read"):
        fd = _os_file(filename)
        if fd is None:
            if options:
                raise error("InvalidArgument", f"reader options ({', '.join(sorted(options))}) apply to paths "
                                               f"and URLs, not to a {type(filename).__name__}")
            return StreamSource(filename)
        filename = f"/proc/self/fd/{fd}"  # the engine reads it: in parallel, the GIL released
    reader = open_reader(filename, options)
    try:
        if backend == "mmap" and all(not is_url(s[0]) for s in reader.shards()):
            return MappedSource(reader, options.get("threads"))
        return EngineSource(reader)
    except BaseException:
        reader.close()
        raise



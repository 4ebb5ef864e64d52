"""Where a load's bytes come from, behind one interface that safe_open and
load_file share; open_source() picks the source:

- MappedSource (_mapped.py): local files with backend="mmap" (the default),
  hf:// files found in the Hub cache too: tensors are views of a private
  mapping, made resident in parallel first;
- EngineSource (_engine_source.py): backend="pread", URLs, s3:// and remote
  indexes: parallel io_uring / HTTP reads into owned memory;
- StreamSource (_stream.py): an open Python file object that is not a plain
  operating-system file (BytesIO, fsspec, GzipFile); a plain binary file
  (io.FileIO, or a buffered reader over one) is opened by path through
  /proc/self/fd, with errors naming the object's name; a closed one is
  reopened by its name, as the reference does.

A source knows its tensors as TensorInfo records (name, dtype, shape, begin,
end, nbytes, shard) in data order and hands out whole tensors (load, one) and
boxes of one (box): the Source protocol below."""

import collections
import io
import os
import stat
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import SafetensorError, error
from ._engine_source import EngineSource
from ._mapped import MappedSource, checked_mapping
from ._paths import spec_of
from ._ringsafe import Reader
from ._stream import StreamSource, describe, protocol_error

if TYPE_CHECKING:
    from ._typing import ReaderOptions

BACKENDS = ("mmap", "pread")


class Source(Protocol):
    """What safe_open and load_file use of a source (EngineSource,
    MappedSource, StreamSource). Every load/one/box takes names the caller
    resolved and whose dtypes it checked (adapter.check_dtype) before any I/O."""

    infos: list      # TensorInfo of every tensor, in data order
    by_name: dict    # {name: TensorInfo}
    reader: object   # the engine's Reader, or None (a file object read through Python)
    closed: bool

    def metadata(self):
        """The header's __metadata__ (dict of str), or None."""

    def resolve(self, select):
        """Selected names in data order (select: None, a name or glob, or a list: _selection)."""

    def check(self, name):
        """TensorNotFound for a name the file does not hold."""

    def load(self, adapter, names, progress):
        """{name: tensor} of ``names``, in one call (parallel where the source can)."""

    def one(self, adapter, name):
        """One whole tensor."""

    def box(self, adapter, info, box, box_shape):
        """The box [(start, stop), ...] of tensor ``info``, of shape box_shape."""

    def read_ahead(self, names):
        """Arms read-ahead of ``names`` in file order (the mapped source; else nothing)."""

    def read_ahead_from(self, name):
        """Starts the armed read-ahead from ``name`` on (the mapped source; else nothing)."""

    def close(self):
        """Releases the file; tensors handed out stay valid."""


def check_backend(backend):
    """The backend name, checked as the reference checks it."""
    if not isinstance(backend, str):
        raise TypeError(f"argument 'backend': '{type(backend).__name__}' is not an instance of 'str'")
    if backend not in BACKENDS:
        raise error("InvalidArgument", f'backend "{backend}" is invalid (expected one of: "mmap", "pread")')
    return backend


def open_reader(filename, options):
    """A Reader for a path, URL or index, with the caller's Reader options; a
    GGUF file (told by its first bytes) is refused: this API reads safetensors."""
    reader = Reader(spec_of(filename), **options)
    if reader.format != "safetensors":
        spec = reader.spec
        reader.close()
        raise error("InvalidArgument", f"{spec} is a GGUF file, not safetensors")
    return reader


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
    for i in range(len(shards)):
        sa, sb = a.shard_stat(i), b.shard_stat(i)
        if sa[:2] != sb[:2]:
            return "replaced"
        if sa != sb and changed is None:
            changed = shards[i].spec
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
    from ._ringsafe import MappedFile
    if not all(reader.shard_file(i) for i in range(len(reader.shards()))):
        return False  # a URL
    ranges = file_ranges(reader, infos)  # adjacent tensors merged: one mincore each
    total = sum(n for rs in ranges.values() for _, n in rs)
    if total < DIRECT_MIN_BYTES:
        return False
    resident = 0
    for shard, rs in ranges.items():
        m = MappedFile(reader.shard_file(shard))
        if m.stat != reader.shard_stat(shard):
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
    from ._ringsafe import MappedFile
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
    for shard, rs in ranges.items():
        try:
            m = MappedFile(files[shard])  # the local file (an hf:// shard's: the Hub cache's)
        except (OSError, SafetensorError):
            return None  # gone, or not mappable: the reader has it open
        if m.identity != reader.shard_identity(shard):
            return None  # another file at the path: the reader reads the one it parsed
        resident += sum(m.resident(off, n) for off, n in rs)
        maps[shard] = m
    if resident < HOT_FRACTION * total:
        return None
    # Copied from: checked as the mmap backend checks (a rewrite in place or
    # another header raises ObjectChanged).
    return {shard: checked_mapping(reader, shard, m) for shard, m in maps.items()}


# How loads into caller memory went, counted per call (the tests read it):
# "mapped" copied from mappings, "direct" reopened with O_DIRECT, "reader" read
# with the reader as opened.
LOADS: collections.Counter[str] = collections.Counter()


def mapped_or_read(reader, filename, *, options, infos, byte_views=None):
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
    """The descriptor of a plain binary operating-system file (io.FileIO, or a
    buffered reader over one) on a regular file, else None. Wrappers that
    transform the bytes (GzipFile, BZ2File, text layers) expose the underlying
    file's fileno() too: they are read through their own read()."""
    raw = f.raw if isinstance(f, (io.BufferedReader, io.BufferedRandom)) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        fd = raw.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):
        return None


def _renamed(e, proc, name):
    """``e`` (raised for ``proc``, a /proc/self/fd path) naming the file object's ``name`` instead."""
    out: SafetensorError
    if isinstance(e, OSError) and isinstance(e, SafetensorError):
        out = type(e)(e.errno, (e.strerror or "").replace(proc, name), name)
        detail = getattr(e, "detail", None)
        if isinstance(detail, str):
            out.__notes__ = [detail.replace(proc, name)]
            setattr(out, "detail", out.__notes__[0])  # the system errors' .detail (_ringsafe.pyi)
    elif isinstance(e, SafetensorError):
        out = SafetensorError(str(e).replace(proc, name))
    else:
        return e
    out.kind = getattr(e, "kind", None)
    return out


def _open_file_object(f, backend, options):
    """The source for an open binary file object: (source, None), or (None, the
    path to open instead)."""
    name = getattr(f, "name", None)
    named = isinstance(name, (str, bytes, os.PathLike))
    if getattr(f, "closed", False):
        if named:
            return None, name  # closed: reopened by its name, as the reference does
        raise error("InvalidArgument", f"the {type(f).__name__} is closed and has no name to reopen it by")
    if isinstance(f, io.TextIOBase):
        if named and os.path.isfile(name):  # type: ignore[arg-type]  # named: a str, bytes or PathLike
            return None, name  # open(path, "r"): the file it names, read by that name, as the reference does
        raise protocol_error(describe(f), f"a {type(f).__name__} is text: its read() returns str, not bytes")
    fd = _os_file(f)
    if fd is None:
        if options:
            raise error("InvalidArgument", f"reader options ({', '.join(sorted(options))}) apply to paths "
                                           f"and URLs, not to a {type(f).__name__}")
        return StreamSource(f), None
    proc = f"/proc/self/fd/{fd}"  # the engine reads it: in parallel, the GIL released
    try:
        return _open_path(proc, backend, options), None
    except (OSError, SafetensorError) as e:
        raise _renamed(e, proc, describe(f)) from None


def _open_path(filename, backend, options):
    reader = open_reader(filename, options)
    try:
        # Local files, the Hub cache's files of an hf:// checkpoint among them.
        if backend == "mmap" and all(reader.shard_file(i) for i in range(len(reader.shards()))):
            return MappedSource(reader, options.get("threads"))
        return EngineSource(reader)
    except BaseException:
        reader.close()
        raise


def open_source(filename: Any, backend: str, options: "ReaderOptions") -> Source:
    """The source for ``filename`` (a path, URL, index or binary file object)."""
    check_backend(backend)
    if not isinstance(filename, (str, bytes, os.PathLike)) and hasattr(filename, "read"):
        source, filename = _open_file_object(filename, backend, options)
        if source is not None:
            return source
    return _open_path(filename, backend, options)



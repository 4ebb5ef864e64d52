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

import io
import os
import stat

from ._dtypes import error
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



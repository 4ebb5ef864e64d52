"""Where a load's bytes come from, behind one interface that safe_open and
load_file share; open_source() picks the source:

- MappedSource (_mapped.py): local files with backend="mmap" (the default),
  hf:// files found in the Hub cache too: tensors are views of a private
  mapping, made resident in parallel first;
- EngineSource (_engine_source.py): backend="pread", URLs, s3:// and remote
  indexes: parallel io_uring / HTTP reads into owned memory;
- StreamSource (_stream.py): an open Python file object that is not a plain
  operating-system file (BytesIO, fsspec, GzipFile); a plain one is read by
  path (_file_object.py says how).

A source knows its tensors as TensorInfo records (name, dtype, shape, begin,
end, nbytes, shard) in data order and hands out whole tensors (load, one) and
boxes of one (box): the Source protocol below."""

import os
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import error
from ._engine_source import EngineSource
from ._file_object import file_object_source
from ._mapped import MappedSource
from ._paths import spec_of
from ._ringsafe import Reader

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
        return file_object_source(filename, options, lambda path: _open_path(path, backend, options))
    return _open_path(filename, backend, options)



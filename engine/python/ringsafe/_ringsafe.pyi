# Types of ringsafe._ringsafe, the compiled extension (engine/python/*.cpp).
# tests/python/test_types.py compares this file with the module: every name,
# every class's public members and every parameter name must match.
import builtins
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeVar, final, overload

from typing_extensions import Unpack

from ._described import (
    AddressedRequest,
    DescribedTensor,
    FileRange,
    GGUFEntry,
    MemorySpan,
    RangeCopy,
    TensorRequest,
)
from ._typing import (
    ArenaCacheStats,
    Box,
    Buffer,
    DeviceReadCounts,
    Metadata,
    ProgressCallback,
    ReaderOptions,
    StrPath,
    WriterOptions,
    WriterStats,
)

_Names = TypeVar("_Names", bound=Sequence[str])

__version__: str  # meson.build's project version

# ---------------------------------------------------------------- errors (errors.cpp)

class _SwitchedSafetensorError(Exception):
    """safetensors.SafetensorError under ringsafe.install(): the base of SafetensorError."""

class SafetensorError(_SwitchedSafetensorError):
    """A format or usage error; .kind names it as the reference spells it."""

    kind: str | None

# The system errors: each is its OSError subclass and a SafetensorError at once; str() is
# "<the system's text>: <path>" as the reference writes it, .detail (and __notes__) the engine's message.
class OSError(builtins.OSError, SafetensorError): ...
class BlockingIOError(builtins.BlockingIOError, SafetensorError): ...
class ChildProcessError(builtins.ChildProcessError, SafetensorError): ...
class ConnectionError(builtins.ConnectionError, SafetensorError): ...
class BrokenPipeError(builtins.BrokenPipeError, SafetensorError): ...
class ConnectionAbortedError(builtins.ConnectionAbortedError, SafetensorError): ...
class ConnectionRefusedError(builtins.ConnectionRefusedError, SafetensorError): ...
class ConnectionResetError(builtins.ConnectionResetError, SafetensorError): ...
class FileExistsError(builtins.FileExistsError, SafetensorError): ...
class FileNotFoundError(builtins.FileNotFoundError, SafetensorError): ...
class InterruptedError(builtins.InterruptedError, SafetensorError): ...
class IsADirectoryError(builtins.IsADirectoryError, SafetensorError): ...
class NotADirectoryError(builtins.NotADirectoryError, SafetensorError): ...
class PermissionError(builtins.PermissionError, SafetensorError): ...
class ProcessLookupError(builtins.ProcessLookupError, SafetensorError): ...
class TimeoutError(builtins.TimeoutError, SafetensorError): ...

# ---------------------------------------------------------------- memory (arena.cpp)

@final
class Arena:
    """Owned host memory exposed through the buffer protocol."""

    def __init__(self, size: int, huge: bool = True, prefault: bool = False, recycle: bool = False) -> None: ...
    @property
    def address(self) -> int: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def arena_cache_stats() -> ArenaCacheStats: ...
def set_arena_cache(limit: int | None = None, idle_seconds: float | None = None) -> None: ...
def trim_arena_cache() -> None: ...

# ---------------------------------------------------------------- headers (header_binding.cpp)

# One tensor of a header: a record read by name (not a tuple).
@final
class TensorInfo:
    """One tensor of a checkpoint's header (read-only)."""

    def __init__(self, *, name: str, dtype: str, shape: Iterable[int], begin: int, end: int,
                 shard: int = 0) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def begin(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def shard(self) -> int: ...

# What a file was when opened (ShardInfo.stat, MappedFile.stat): a record read by name.
@final
class FileStat:
    """A file as opened (read-only): which file (device, inode), its size and mtime_ns."""

    def __init__(self, *, device: int, inode: int, size: int, mtime_ns: int) -> None: ...
    @property
    def device(self) -> int: ...  # st_dev; 0 for a URL
    @property
    def inode(self) -> int: ...  # st_ino; 0 for a URL
    @property
    def size(self) -> int: ...
    @property
    def mtime_ns(self) -> int: ...  # st_mtime_ns; 0 for a URL
    def same_file(self, other: FileStat) -> bool: ...  # same device and inode

# One shard of an open checkpoint (Reader.shards()): a record read by name (not a tuple).
@final
class ShardInfo:
    """One shard of an open checkpoint (read-only)."""

    def __init__(self, *, spec: str, size: int, data_start: int, stat: FileStat | None = None) -> None: ...
    @property
    def spec(self) -> str: ...  # a URL's signing values written "..."
    @property
    def raw_spec(self) -> str: ...  # signing values included
    @property
    def size(self) -> int: ...
    @property
    def data_start(self) -> int: ...
    @property
    def stat(self) -> FileStat: ...  # the file as the reader opened it

# A header parsed from bytes (parse_bytes, parse_header): a record read by name (not a tuple).
@final
class ParsedHeader:
    """A header parsed from bytes (read-only)."""

    @property
    def tensors(self) -> list[TensorInfo]: ...  # in data order
    @property
    def metadata(self) -> Metadata | None: ...  # __metadata__
    @property
    def data_start(self) -> int: ...  # 8 + the header's length

def parse_bytes(data: Buffer) -> ParsedHeader: ...
def parse_prefix(prefix: bytes, file_size: int, max_header_size: int = ...) -> int: ...
def parse_header(json: bytes, file_size: int, max_header_size: int = ...) -> ParsedHeader: ...
def glob_match(pattern: str, name: str) -> bool: ...

# ---------------------------------------------------------------- reading (reader_binding.cpp)

def without_url_secrets(text: str) -> str: ...
def is_url(spec: StrPath) -> bool: ...
# A small file read whole (fetch_file): a record read by name (not a tuple).
@final
class FetchedFile:
    """A small file read whole (read-only): its bytes and what was read."""

    @property
    def data(self) -> bytes: ...
    @property
    def name(self) -> str: ...  # an hf:// URL pinned to its commit

def fetch_file(spec: str, **kwargs: Unpack[ReaderOptions]) -> FetchedFile: ...
def http_connections(connections: int | None = None) -> int: ...

@final
class Plan:
    """A validated read plan into caller memory."""

    @property
    def total_bytes(self) -> int: ...

@final
class Pending:
    """An engine job running on a call thread."""

    def wait(self, progress: ProgressCallback | None = None) -> None: ...
    def cancel(self) -> None: ...

@final
class Reader:
    """An open checkpoint: a file, an http(s)/s3/gs/az/hf URL or a sharded index."""

    def __init__(self, spec: StrPath, **kwargs: Unpack[ReaderOptions]) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def spec(self) -> str: ...  # a URL's signing values written "..."
    @property
    def raw_spec(self) -> str: ...  # signing values included
    @property
    def total_bytes(self) -> int: ...
    @property
    def format(self) -> Literal["safetensors", "gguf"]: ...
    def metadata(self) -> Metadata | None: ...
    def tensors(self) -> list[TensorInfo]: ...
    def shards(self) -> list[ShardInfo]: ...
    def shard_file(self, arg0: int, /) -> str | None: ...
    def header_matches(self, shard: int, data: Buffer) -> bool: ...
    def select_glob(self, arg0: Sequence[str], /) -> list[str]: ...
    def select(self, arg0: _Names, /) -> _Names: ...
    def box_bytes(self, arg0: str, arg1: list[tuple[int, int]], /) -> int: ...
    def plan_tensors(self, names: Sequence[str], dsts: list[Buffer]) -> Plan: ...
    # TensorRequest records; the (name, box, buffer) tuples are also accepted.
    def plan_requests(self, requests: Sequence[TensorRequest | tuple[str, Box, Buffer]]) -> Plan: ...
    def execute(self, plan: Plan, progress: ProgressCallback | None = None) -> None: ...
    def start(self, arg0: Plan, /) -> Pending: ...

# The raw-address calls (ringsafe.lowlevel): the engine writes to the addresses unchecked. Their
# destinations are records (MemorySpan, AddressedRequest); the tuples of the same fields are also accepted.
def plan_tensors_at(reader: Reader, names: Sequence[str], dsts: Sequence[MemorySpan | tuple[int, int]],
                    keep: list[object] = ...) -> Plan: ...
def plan_requests_at(reader: Reader, requests: Sequence[AddressedRequest | tuple[str, Box, int, int]],
                     keep: list[object] = ...) -> Plan: ...
def read_to_device_at(reader: Reader, names: Sequence[str], dsts: Sequence[MemorySpan | tuple[int, int]],
                      device: int = 0,
                      stand_in: bool = False, staging_size: int = 16777216, staging_count: int = 4,
                      progress: ProgressCallback | None = None, stager: DeviceStager | None = None,
                      stream: int = 0) -> DeviceReadCounts: ...

# Tests only, not an API (tests/python/test_device.py): read_to_device_at with the host
# stand-in and its hooks; the result is the read's counts and `trace`, the stand-in's steps.
def _stand_in_read_with_hooks(reader: Reader, names: Sequence[str], dsts: Sequence[MemorySpan | tuple[int, int]], *,
                              staging_size: int = 4096, staging_count: int = 2, fail_copy_at: int | None = None,
                              cancel_at_copy: int | None = None, stream: int = 0) -> dict[str, Any]: ...

# ---------------------------------------------------------------- devices (device_binding.cpp)

# Whether the CUDA runtime loads: a record read by name (not a tuple).
@final
class CudaRuntime:
    """Whether the CUDA runtime can be loaded (read-only)."""

    @property
    def available(self) -> bool: ...
    @property
    def reason(self) -> str: ...  # '' when available

def cuda_runtime_available() -> CudaRuntime: ...

@final
class DeviceStager:
    """A staging ring and copier kept across device reads."""

    def __init__(self, device: int = 0, stand_in: bool = False, staging_size: int = 16777216,
                 staging_count: int = 4) -> None: ...
    @property
    def staging_buffers(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def stand_in(self) -> bool: ...
    def close(self) -> None: ...

# ---------------------------------------------------------------- writing (writer_binding.cpp)

def save_declared(path: StrPath, tensors: list[DescribedTensor], metadata: Metadata | None = None,
                  sync: bool = True, threads: int = 2, progress: ProgressCallback | None = None) -> None: ...
def serialize(tensors: list[DescribedTensor], metadata: Metadata | None = None) -> bytes: ...

@final
class StreamWriter:
    """The single-pass streaming writer."""

    def __init__(self, path: StrPath, **kwargs: Unpack[WriterOptions]) -> None: ...
    @staticmethod
    def open_append(path: StrPath, repair: bool = False, sync: bool = True) -> StreamWriter: ...
    def add(self, arg0: str, arg1: str, arg2: Sequence[int], arg3: int, arg4: int, /) -> None: ...
    def finish(self, metadata: Metadata | None = None) -> WriterStats: ...
    def abandon(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def stats(self) -> WriterStats: ...

# ---------------------------------------------------------------- mappings (mapping_binding.cpp)

# What MappedFile.populate() and copy_to() did: a record read by name (not a tuple).
@final
class PopulateStats:
    """What populate() or copy_to() did (read-only)."""

    @property
    def bytes(self) -> int: ...  # of the ranges
    @property
    def cold_bytes(self) -> int: ...  # of those, not in the page cache before
    @property
    def threads(self) -> int: ...  # that worked on it

@final
class MappedFile:
    """A local file mapped private (copy-on-write) into memory."""

    def __init__(self, path: StrPath) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def stat(self) -> FileStat: ...  # the file when it was mapped
    @property
    def address(self) -> int: ...
    # FileRange / RangeCopy records; the (offset, length) and (offset, length, buffer) tuples are also accepted.
    def populate(self, ranges: Sequence[FileRange | tuple[int, int]], threads: int = 0,
                 progress: ProgressCallback | None = None) -> PopulateStats: ...
    def copy_to(self, copies: Sequence[RangeCopy | tuple[int, int, Buffer]], threads: int = 0,
                progress: ProgressCallback | None = None) -> PopulateStats: ...
    def resident(self, offset: int, length: int) -> int: ...
    def will_need(self, offset: int, length: int) -> None: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

# ---------------------------------------------------------------- dequantization (dequantize_binding.cpp)

# With `out`: the bytes written there; without: the output as bytes.
@overload
def dequantize(type_name: str, data: Buffer, out_dtype: str = "F32", *, out: Buffer,
               threads: int = 0) -> int: ...
@overload
def dequantize(type_name: str, data: Buffer, out_dtype: str = "F32", *, out: None = None,
               threads: int = 0) -> bytes: ...
def can_dequantize(type_name: str) -> bool: ...

# ---------------------------------------------------------------- GGUF (gguf_binding.cpp)

# A GGUF reader's header and tensors: records read by name (not tuples).
@final
class GGUFMetadataEntry:
    """One metadata entry of a GGUF header (read-only)."""

    @property
    def key(self) -> str: ...
    @property
    def type(self) -> str: ...  # gguf-py's GGUFValueType name
    @property
    def element_type(self) -> str | None: ...  # an ARRAY's, else None
    @property
    def value(self) -> Any: ...  # as gguf-py's ReaderField.contents() gives it

@final
class GGUFHeader:
    """A GGUF reader's header (read-only)."""

    @property
    def version(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    @property
    def data_offset(self) -> int: ...
    @property
    def metadata(self) -> list[GGUFMetadataEntry]: ...  # in file order

@final
class GGUFTensorInfo:
    """One tensor of a GGUF reader (read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...  # gguf-py's GGMLQuantizationType name
    @property
    def shape(self) -> tuple[int, ...]: ...  # PyTorch order (ggml's ne reversed)
    @property
    def offset(self) -> int: ...  # relative to its shard's data section
    @property
    def nbytes(self) -> int: ...
    @property
    def shard(self) -> int: ...

def gguf_header(reader: Reader) -> GGUFHeader: ...
def gguf_tensors(reader: Reader) -> list[GGUFTensorInfo]: ...  # in data order
def gguf_read(reader: Reader, names: Sequence[str], dsts: list[Buffer], outs: list[str | None], *,
              threads: int = 0, staging_bytes: int | None = None,
              progress: ProgressCallback | None = None) -> None: ...

# ---------------------------------------------------------------- conversions (convert_binding.cpp)

# What convert() did: a record read by name (not a tuple).
@final
class ConvertStats:
    """What convert() did (read-only)."""

    @property
    def bytes(self) -> int: ...
    @property
    def tensors(self) -> int: ...
    @property
    def files(self) -> list[str]: ...  # written, in order
    @property
    def buffers(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...
    @property
    def readers(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def write_waited(self) -> float: ...
    @property
    def read_waited(self) -> float: ...

def convert(source: StrPath, target: StrPath, *, select: Sequence[str] | None = None, dtype: str = "F32",
            max_shard_size: int | None = None, split_max_size: int | None = None,
            split_max_tensors: int | None = None, buffer_size: int = 67108864, buffers: int = 4,
            direct_write: bool = True, sync: bool = True, progress: ProgressCallback | None = None,
            **kwargs: Unpack[ReaderOptions]) -> ConvertStats: ...

# ---------------------------------------------------------------- GGUF writing (gguf_writer_binding.cpp)
def gguf_save(path: StrPath, tensors: list[DescribedTensor], metadata: list[GGUFEntry], alignment: int,
              sync: bool) -> None: ...

@final
class GGUFStreamWriter:
    """The streaming GGUF writer."""

    def __init__(self, path: StrPath, metadata: list[GGUFEntry], alignment: int, sync: bool, reserve_bytes: int,
                 expected_tensors: int, direct: bool) -> None: ...
    def add(self, name: str, type_name: str, shape: Sequence[int], address: int, nbytes: int) -> None: ...
    def finish(self, metadata: list[GGUFEntry] | None) -> dict[str, Any]: ...
    def abandon(self) -> None: ...
    @property
    def closed(self) -> bool: ...

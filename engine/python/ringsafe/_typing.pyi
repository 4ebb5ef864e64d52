# Types the annotations of ringsafe share, for type checkers only: this module
# has no .py (as typeshed's _typeshed); import it under `if TYPE_CHECKING:`.
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol

from typing_extensions import Buffer as Buffer  # re-exported: what the buffer parameters take
from typing_extensions import TypeAlias, TypedDict

# What a path argument may be: str, bytes or os.PathLike (or a URL, as str).
StrPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]

# progress(done_bytes, total_bytes), called on the calling thread; its result is ignored.
ProgressCallback: TypeAlias = Callable[[int, int], object]
# What a public call's progress= takes: the callable, True (a tqdm bar), or None/False.
Progress: TypeAlias = ProgressCallback | bool | None

# select=: None (every tensor), a name or glob, or names and globs.
Select: TypeAlias = str | Iterable[str] | None

# A box of a tensor: (start, stop) per leading dimension.
Box: TypeAlias = Sequence[tuple[int, int]]

# __metadata__ of a header.
Metadata: TypeAlias = dict[str, str]

class ReaderOptions(TypedDict, total=False):
    """The keyword options of Reader() (and of every call that opens a checkpoint);
    None means the engine's default."""

    threads: int | None
    queue_depth: int | None
    direct: bool | None
    file_chunk: int | None
    connections: int | None
    http_threads: int | None
    http_chunk: int | None
    token: str | None
    headers: dict[str, str] | None
    cross_origin_headers: Sequence[str] | None
    allow_https_downgrade: bool | None
    ca_file: str | None
    verify_tls: bool | None
    max_attempts: int | None
    max_total_attempts: int | None
    low_speed_limit: int | None
    low_speed_time: int | None
    s3_endpoint: str | None
    s3_region: str | None
    endpoint_url: str | None
    anonymous: bool | None
    gcs_credentials: str | None
    azure_account: str | None
    azure_key: str | None
    azure_sas_token: str | None
    azure_connection_string: str | None
    cache: bool | None
    cache_dir: str | None
    local_files_only: bool | None
    verify: bool | None
    max_header_size: int | None
    parallel_shards: int | None
    split_set: bool | None

class WriterOptions(TypedDict, total=False):
    """The keyword options of StreamWriter()."""

    reserve_bytes: int | None
    expected_tensors: int | None
    direct: bool | None
    sync: bool | None
    strict_reservation: bool | None

class WriterStats(TypedDict):
    """What StreamWriter.finish() / stats() (and Writer.finish()) return."""

    tensors: int
    data_bytes: int
    file_size: int
    header_reserved: int
    header_json: int
    direct: bool
    relocation: str

class ArenaCacheStats(TypedDict):
    """What arena_cache_stats() returns."""

    cached_bytes: int
    buffers: int
    hits: int
    misses: int
    released: int
    limit: int
    idle_seconds: float

class DeviceReadCounts(TypedDict):
    """What _ringsafe.read_to_device_at returns: bytes staged through pinned
    buffers and copied directly, staging batches and copies issued."""

    staged_bytes: int
    direct_bytes: int
    batches: int
    copies: int


class BinaryFile(Protocol):
    """An open binary file object a checkpoint is read from (io.BytesIO, an
    open file, fsspec's, a GzipFile): read() (or readinto()) and seek()."""

    def read(self, size: int = ..., /) -> bytes: ...
    def seek(self, offset: int, whence: int = ..., /) -> int: ...

# What the loaders open: a path or URL (local, http(s)://, s3://, hf://, gs://, az://,
# a sharded *.index.json), or an open binary file object.
Source: TypeAlias = StrPath | BinaryFile

# A framework's name for a device: "cpu", "cuda", "cuda:1", an index (a CUDA device)...
DeviceName: TypeAlias = str | int

# A backend of the loaders.
Backend: TypeAlias = Literal["mmap", "pread"]

# ringsafe.distributed's shard=: per tensor, a dimension to split evenly across the
# ranks, a box of the leading dimensions ((start, stop) pairs or step-1 slices), or
# None (the whole tensor); given as {name or glob: that} or a callable(name, shape).
ShardSpec: TypeAlias = int | Sequence[tuple[int, int] | slice] | None
Shard: TypeAlias = dict[str, ShardSpec] | Callable[[str, list[int]], ShardSpec] | None

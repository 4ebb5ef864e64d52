"""Writing for both frameworks: a whole dict (save_file / save, the
reference's exact layout, straight from the tensors' memory) and the Writer,
for tensors produced one at a time (single pass, bounded memory, append)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._described import DescribedTensor
from ._frameworks import adapter_of
from ._paths import spec_of
from ._progress import progress_callback
from ._ringsafe import StreamWriter, save_declared, serialize
from ._serialize import TensorSpec, check_metadata

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType
    from typing import Literal

    from typing_extensions import Self

    from ._frameworks import Adapter
    from ._typing import Buffer, Metadata, StrPath, WriterStats


def describe_all(adapter: Adapter, tensors: Any) -> list[DescribedTensor]:
    """The DescribedTensor records of a dict of tensors (the engine writers'
    argument; each record's owner keeps its bytes alive while it lives), after
    the reference's checks, in its order and with its messages: a dict, each
    value a tensor, none sparse (all named at once), no overlapping bytes, each
    contiguous; then names that are str."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, {adapter.tensor_type}] but received {type(tensors)}")
    for name, t in tensors.items():
        adapter.check_type(t, name)
    sparse = [name for name, t in tensors.items() if adapter.is_sparse(t)]
    if sparse:
        raise ValueError(f"You are trying to save a sparse tensors: `{sparse}` which this library does not support."
                         " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
                         " make a much larger file than needed.")
    shared = adapter.shared_groups(tensors)
    if shared:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential differences "
            f"when loading them again: {shared}. A potential way to correctly save your model is to use "
            f"`save_model`. More information at https://huggingface.co/docs/safetensors/torch_shared_tensors")
    described = []
    for name, t in tensors.items():
        d = adapter.describe(t, name)
        described.append(DescribedTensor(name, d.dtype, d.shape, d.address, d.nbytes, d.owner))
    for name in tensors:
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {name!r}")
    return described



def tensor_specs(adapter, tensors, keep_alive_buffer):
    """{name: TensorSpec} of a framework's dict of tensors (the reference's
    _flatten / _flatten_as_ptr); what keeps their bytes alive goes into keep_alive_buffer."""
    described = describe_all(adapter, tensors)
    keep_alive_buffer.extend(d.owner for d in described)
    out = {}
    for d in described:
        spec = TensorSpec(dtype="uint8", shape=[d.nbytes], data_ptr=d.address, data_len=d.nbytes)
        spec._dtype, spec._shape = d.dtype, list(d.shape)
        out[d.name] = spec
    return out

def save_file(adapter, tensors, filename, *, metadata, sync, progress):
    described = describe_all(adapter, tensors)
    metadata = check_metadata(metadata)
    with progress_callback(progress, f"saving {filename}") as cb:
        save_declared(spec_of(filename), described, metadata, sync, 2, cb)
    del described  # its owners kept the bytes alive until the write returned


def save_bytes(adapter, tensors, metadata):
    described = describe_all(adapter, tensors)
    out = serialize(described, check_metadata(metadata))
    del described
    return out


class OnePassWriter:
    """What both streaming writers (safetensors' Writer, GGUF's) share over the
    engine's writer ``_w``: adding tensors, and the lifecycle: the file is
    published by finish(), by a ``with`` block that ends without an exception,
    and is otherwise abandoned (nothing at the path)."""

    _w: Any  # the engine's streaming writer (StreamWriter, GGUFStreamWriter)

    def finish(self) -> Any:
        raise NotImplementedError

    def write(self, name: str, tensor: Any) -> None:  # a torch.Tensor or numpy.ndarray
        """Adds a whole tensor (a torch tensor or NumPy array)."""
        adapter = adapter_of(tensor)
        if adapter is None:
            raise TypeError(f"write() takes a torch tensor or a NumPy array, got {type(tensor).__name__}")
        d = adapter.describe(tensor, name)
        self._w.add(name, d.dtype, list(d.shape), d.address, d.nbytes)
        del d  # its owner kept the bytes alive until add() returned

    def _add_bytes(self, name: str, type_name: str, shape: Sequence[int], data: Buffer) -> None:
        """write_bytes(): raw little-endian bytes of ``type_name`` and ``shape``, added as they are."""
        import numpy as np

        view = memoryview(data)
        if not view.c_contiguous:
            raise TypeError(f"write_bytes() of '{name}': data must be C-contiguous memory; this "
                            f"{type(data).__name__} is strided or reversed (copy it first, e.g. bytes(view))")
        raw = np.frombuffer(view.cast("B"), dtype=np.uint8)
        self._w.add(name, type_name, list(shape), raw.ctypes.data if raw.size else 0, raw.nbytes)

    def abandon(self) -> None:
        """Drops everything written; nothing appears at the path."""
        self._w.abandon()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc_type is None and not self._w.closed:
            self.finish()
        else:
            self.abandon()
        return False

    def __del__(self) -> None:
        w = getattr(self, "_w", None)
        if w is not None and not w.closed:
            w.abandon()


class Writer(OnePassWriter):
    """Writes a safetensors file one tensor at a time, in one pass:
    ``with Writer(path) as w: w.write(name, tensor)``. Header space is reserved
    up front and filled in at the end; the file appears at ``path`` only when
    the block ends without an exception (otherwise nothing is left there).
    ``append=True`` adds tensors to an existing file in place. Tensors may be
    torch tensors or NumPy arrays; each is copied out before write() returns,
    so memory stays bounded (48 MiB of staging) whatever the file's size."""

    def __init__(self, path: StrPath, *, metadata: Metadata | None = None, append: bool = False, repair: bool = False,
                 sync: bool = True, expected_tensors: int | None = None, reserve_bytes: int | None = None,
                 direct: bool | None = None) -> None:
        self._metadata = check_metadata(metadata)
        spec = spec_of(path)
        if append:
            self._w = StreamWriter.open_append(spec, repair=repair, sync=sync)
        else:
            self._w = StreamWriter(spec, sync=sync, expected_tensors=expected_tensors,
                                   reserve_bytes=reserve_bytes, direct=direct)
        self.path: str = spec
        self.stats: WriterStats | None = None

    def write_bytes(self, name: str, dtype: str, shape: Sequence[int], data: Buffer) -> None:
        """Adds a tensor from raw little-endian bytes (any buffer) of the given
        safetensors dtype ("F32", "BF16", ...) and shape."""
        self._add_bytes(name, dtype, shape, data)

    def finish(self, metadata: Metadata | None = None) -> WriterStats:
        """Writes the header, syncs and publishes; returns the writer's stats."""
        md = check_metadata(metadata) if metadata is not None else self._metadata
        self.stats = self._w.finish(md)
        return self.stats

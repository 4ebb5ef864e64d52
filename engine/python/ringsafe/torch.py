"""ringsafe for PyTorch: the ``safetensors.torch`` API on ringsafe's engine,
plus what that API lacks (URLs, S3, sharded indexes, select=, read_into,
iter_tensors, progress, the GIL released throughout).

Switching is an import: ``from ringsafe.torch import load_file, save_file``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from . import _load, _model, _write
from ._open import safe_open
from ._serialize import TensorSpec, deserialize, serialize, serialize_file
from ._shared import (  # noqa: F401  (the reference's names; transformers, accelerate and convert.py import them)
    _end_ptr,
    _filter_shared_not_shared,
    _find_shared_tensors,
    _is_complete,
    _remove_duplicate_names,
    storage_ptr,
    storage_size,
)
from ._torch_adapter import _NAMES, _TYPES as _ALL_TYPES, ADAPTER

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy
    from typing_extensions import Unpack

    from ._typing import Backend, Metadata, Progress, ReaderOptions, Select, Source, StrPath


def load_file(filename: Source, device: str | int | torch.device = "cpu", *, backend: Backend = "mmap",
              select: Select = None, progress: Progress = None,
              **options: Unpack[ReaderOptions]) -> dict[str, torch.Tensor]:
    """Loads a checkpoint (path, URL, s3://, hf://, index or binary file object) into {name: tensor}.

    backend="mmap" (default): a local file's tensors are zero-copy views of one
    private mapping, made resident in parallel before this returns (shared
    with other processes through the page cache; writes stay private).
    backend="pread", and every remote source: one parallel read into owned
    memory. Each tensor has a storage of its own bytes; the memory goes with
    the last tensor. ``select`` takes names and globs; ``progress`` a
    callable(done, total) or True for tqdm; ``options`` the Reader's
    (threads, connections, token, ...)."""
    return _load.load_file(ADAPTER, filename, device=device, select=select, progress=progress, backend=backend,
                           options=options)


def load(data: bytes | bytearray | memoryview, device: str | int | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Loads safetensors bytes into {name: tensor} (one copy of the data)."""
    return _load.load_bytes(ADAPTER, data, device)


def read_into(filename: StrPath, tensors: dict[str, torch.Tensor], *, progress: Progress = None,
              **options: Unpack[ReaderOptions]) -> dict[str, torch.Tensor]:
    """Fills existing CPU tensors {name: tensor} in place from the checkpoint,
    with no intermediate copy: copied on every core out of a mapping of a
    local file whose selected bytes (16 MiB or more) are in the page cache,
    read with O_DIRECT when they are cold, read through the page cache
    otherwise (``direct=True`` always reads with O_DIRECT, ``direct=False``
    never). Dtypes and sizes are checked for all of them before any I/O
    (SafetensorError naming the tensor)."""
    return _load.read_into(ADAPTER, filename, tensors, progress=progress, options=options)


def iter_tensors(filename: StrPath, *, select: Select = None, memory_limit: int = 1 << 30,
                 device: str | int | torch.device = "cpu", progress: Progress = None,
                 **options: Unpack[ReaderOptions]) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields (name, tensor) in data order as reads complete, reading ahead
    while the consumer works, with at most ``memory_limit`` bytes of staging
    (each tensor must fit in it). A yielded tensor is a view of its batch's
    arena, freed once the consumer drops the batch's tensors."""
    return _load.iter_tensors(ADAPTER, filename, select=select, memory_limit=memory_limit, device=device,
                              progress=progress, options=options)


def save(tensors: dict[str, torch.Tensor], metadata: Metadata | None = None) -> bytes:
    """The safetensors bytes of {name: tensor} (the reference's layout)."""
    return _write.save_bytes(ADAPTER, tensors, metadata)


def save_file(tensors: dict[str, torch.Tensor], filename: StrPath, metadata: Metadata | None = None, *,
              sync: bool = False, progress: Progress = None) -> None:
    """Writes {name: tensor} to ``filename``, byte-identical to the reference's
    save_file, straight from the tensors' memory. The file appears whole or not
    at all (temporary + rename). sync=False writes through the page cache on the
    calling thread (the kernel takes one file's buffered writes one at a time);
    sync=True writes with O_DIRECT, several writes in flight (through 32 MiB of
    staging: the bytes go to the disk, not to the page cache) and fsyncs the
    file before it appears. Conjugate and negative views
    (``t.conj()``, ``t._neg_view()``) are saved with the values they show (the
    reference saves the bytes under them). A failure of the system (a
    directory as the target, a missing parent, no permission) raises the
    OSError subclass that is also a SafetensorError."""
    _write.save_file(ADAPTER, tensors, filename, metadata=metadata, sync=sync, progress=progress)


def load_model(model: torch.nn.Module, filename: StrPath, strict: bool = True,
               device: str | int | torch.device = "cpu", *, backend: Backend = "mmap", progress: Progress = None,
               **options: Unpack[ReaderOptions]) -> tuple[set[str], list[str]]:
    """Loads a checkpoint into a model's parameters and buffers in place,
    straight into their memory: for parameters in host memory, copied on
    every core out of a mapping of a local file whose bytes are in the page
    cache (not with backend="pread", which never maps the file), read with
    O_DIRECT when they are cold, read through the page cache otherwise
    (``direct=`` overrides, as in read_into). The parameters are filled where
    they are, as the reference's load_state_dict copies into them: ``device``
    does not move the model (call ``model.to(device)`` yourself); CUDA
    parameters are read straight into device memory, ordered against
    PyTorch's current stream. Returns (missing, unexpected) as the reference
    does; with strict=True a mismatch raises RuntimeError before any byte is
    read."""
    return _model.load_model(model, filename, strict=strict, device=device, progress=progress, backend=backend,
                             options=options)


def save_model(model: torch.nn.Module, filename: StrPath, metadata: Metadata | None = None,
               force_contiguous: bool = True, *, sync: bool = False) -> None:
    """Saves a model's state_dict, writing tensors that share memory once (the
    dropped names go into the metadata, as the reference does)."""
    _model.save_model(model, filename, metadata=metadata, force_contiguous=force_contiguous, sync=sync)


# The rest of the reference's safetensors.torch namespace, for code that imports it.
_float4_e2m1_x2 = getattr(torch, "float4_e2m1fn_x2", None)
_float8_e4m3fn = getattr(torch, "float8_e4m3fn", None)
_float8_e4m3fnuz = getattr(torch, "float8_e4m3fnuz", None)
_float8_e5m2 = getattr(torch, "float8_e5m2", None)
_float8_e5m2fnuz = getattr(torch, "float8_e5m2fnuz", None)
_float8_e8m0 = getattr(torch, "float8_e8m0fnu", None)
_SIZE = {dt: dt.itemsize for dt in _NAMES}  # bytes per element (1 for float4_e2m1fn_x2: two values)
_TYPES = {code: dt for code, dt in _ALL_TYPES.items() if code not in ("F4", "F8_E8M0")}  # the reference's table


def _getdtype(dtype_str: str) -> torch.dtype:
    """The torch dtype of a safetensors dtype code (KeyError if it has none)."""
    return _TYPES[dtype_str]


def _view2torch(safeview: list[tuple[str, dict[str, Any]]]) -> dict[str, torch.Tensor]:
    """{name: tensor} from deserialize()'s [(name, {"dtype", "shape", "data"})]."""
    out = {}
    for name, v in safeview:
        dt = _ALL_TYPES[v["dtype"]]
        shape = list(v["shape"])
        if dt is _float4_e2m1_x2 and shape:
            shape[-1] //= 2
        out[name] = (torch.empty(shape, dtype=dt) if len(v["data"]) == 0
                     else torch.frombuffer(v["data"], dtype=torch.uint8).view(dt).reshape(shape))
    return out


def _to_ndarray(tensor: torch.Tensor) -> tuple[numpy.ndarray[Any, Any], torch.Tensor]:
    """(uint8 NumPy view of a CPU tensor's bytes, the tensor keeping them alive)."""
    import numpy as np
    if tensor.device.type != "cpu":
        tensor = tensor.to("cpu")
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0 or tensor.data_ptr() == 0:
        return np.empty(0, dtype=np.uint8), tensor
    flat = tensor.reshape(-1).view(torch.uint8) if tensor.is_contiguous() else tensor.contiguous().view(-1).view(torch.uint8)
    return flat.numpy(), flat


def _evaluate_tensors_for_save(tensors: dict[str, torch.Tensor]) -> None:
    """The checks save_file makes (dict of tensors, dense, no overlapping bytes)."""
    _write.describe_all(ADAPTER, tensors)


def _flatten_as_ptr(tensors: dict[str, torch.Tensor], keep_alive_buffer: list[Any]) -> dict[str, TensorSpec]:
    """{name: TensorSpec} of a dict of tensors; what keeps their bytes alive goes into keep_alive_buffer."""
    return _write.tensor_specs(ADAPTER, tensors, keep_alive_buffer)

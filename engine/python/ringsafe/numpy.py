"""ringsafe for NumPy: the ``safetensors.numpy`` API on ringsafe's engine,
plus read_into, iter_tensors, select= and URLs. NumPy has no bfloat16, float8
or float4 types: such tensors raise SafetensorError naming them."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _load, _write
from ._numpy_adapter import _TYPES as _ALL_TYPES, ADAPTER
from ._open import safe_open
from ._serialize import TensorSpec, deserialize, serialize, serialize_file

if TYPE_CHECKING:
    from collections.abc import Iterator

    from numpy.typing import NDArray
    from typing_extensions import Unpack

    from ._typing import Backend, Metadata, Progress, ReaderOptions, Select, Source, StrPath


def load_file(filename: Source, *, backend: Backend = "mmap", select: Select = None, progress: Progress = None,
              **options: Unpack[ReaderOptions]) -> dict[str, NDArray[Any]]:
    """Loads a checkpoint (path, URL, s3://, hf://, index or binary file object) into
    {name: array}: views of a private mapping made resident in parallel
    (backend="mmap", local files), or one parallel read into owned memory."""
    return _load.load_file(ADAPTER, filename, device="cpu", select=select, progress=progress, backend=backend,
                           options=options)


def load(data: bytes | bytearray | memoryview) -> dict[str, NDArray[Any]]:
    """Loads safetensors bytes into {name: array} (one copy of the data)."""
    return _load.load_bytes(ADAPTER, data, "cpu")


def read_into(filename: StrPath, arrays: dict[str, NDArray[Any]], *, progress: Progress = None,
              **options: Unpack[ReaderOptions]) -> dict[str, NDArray[Any]]:
    """Fills existing C-contiguous arrays {name: array} in place (copied out of
    a mapping when their bytes are cached in a local file, O_DIRECT when they
    are cold; see ringsafe.torch.read_into); dtypes and sizes checked for all
    of them before any I/O."""
    return _load.read_into(ADAPTER, filename, arrays, progress=progress, options=options)


def iter_tensors(filename: StrPath, *, select: Select = None, memory_limit: int = 1 << 30, progress: Progress = None,
                 **options: Unpack[ReaderOptions]) -> Iterator[tuple[str, NDArray[Any]]]:
    """Yields (name, array) in data order as reads complete, with at most
    ``memory_limit`` bytes of staging (see ringsafe.torch.iter_tensors)."""
    return _load.iter_tensors(ADAPTER, filename, select=select, memory_limit=memory_limit, device="cpu",
                              progress=progress, options=options)


def save(tensor_dict: dict[str, NDArray[Any]], metadata: Metadata | None = None) -> bytes:
    """The safetensors bytes of {name: array} (the reference's layout)."""
    return _write.save_bytes(ADAPTER, tensor_dict, metadata)


def save_file(tensor_dict: dict[str, NDArray[Any]], filename: StrPath, metadata: Metadata | None = None, *,
              sync: bool = False, progress: Progress = None) -> None:
    """Writes {name: array} to ``filename`` byte-identical to the reference,
    straight from the arrays' memory; published atomically; sync=True writes
    with O_DIRECT and fsyncs (see ringsafe.torch.save_file)."""
    _write.save_file(ADAPTER, tensor_dict, filename, metadata=metadata, sync=sync, progress=progress)


# The rest of the reference's safetensors.numpy namespace, for code that imports it.
_TYPES = {code: dt.type for code, dt in _ALL_TYPES.items()}


def _getdtype(dtype_str: str) -> type[np.generic]:
    """The NumPy type of a safetensors dtype code (KeyError if it has none)."""
    return _TYPES[dtype_str]


def _view2np(safeview: list[tuple[str, dict[str, Any]]]) -> dict[str, NDArray[Any]]:
    """{name: array} from deserialize()'s [(name, {"dtype", "shape", "data"})]."""
    return {name: np.frombuffer(v["data"], dtype=_ALL_TYPES[v["dtype"]]).reshape(v["shape"]) for name, v in safeview}


def _is_little_endian(tensor: NDArray[Any]) -> bool:
    """Whether an array's bytes are little-endian (or have no byte order)."""
    order = tensor.dtype.byteorder
    return order == "<" or order == "|" or (order == "=" and sys.byteorder == "little")


def _flatten(tensor_dict: dict[str, NDArray[Any]], keep_alive_buffer: list[Any]) -> dict[str, TensorSpec]:
    """{name: TensorSpec} of a dict of arrays; byte-swapped copies go into keep_alive_buffer."""
    return _write.tensor_specs(ADAPTER, tensor_dict, keep_alive_buffer)

"""The reference's framework-free API: TensorSpec, serialize, serialize_file
and deserialize, on ringsafe's writer (the reference's exact layout)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._described import DescribedTensor
from ._dtypes import BITS, TORCH_NAMES
from ._errors import error
from ._ringsafe import parse_bytes, save_declared
from ._ringsafe import serialize as _serialize_described

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import SupportsIndex

    from ._ringsafe import ParsedHeader
    from ._typing import Metadata, StrPath

# TensorSpec's dtype names (torch's spelling) and the safetensors codes they stand for.
SPEC_DTYPES = {attr: code for code, attr in TORCH_NAMES.items()}


def _unsigned(value: Any, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"argument '{what}': '{type(value).__name__}' object cannot be interpreted as an integer")
    value = value.__index__()
    if value < 0:
        raise OverflowError(f"argument '{what}': can't convert negative int to unsigned ({value})")
    return value


class TensorSpec:
    """One tensor for serialize() / serialize_file(): its dtype in torch's
    spelling ("float32", "bfloat16", ...; ``.dtype`` gives the safetensors
    code), shape, and the address and length of its contiguous bytes, which
    the caller keeps alive while a serialize call uses them. For
    "float4_e2m1fn_x2" the shape is torch's (two values per byte): the last
    dimension is doubled, as the reference does."""

    __slots__ = ("_dtype", "_shape", "_data_ptr", "_data_len")

    def __init__(self, *, dtype: str, shape: Iterable[SupportsIndex], data_ptr: SupportsIndex,
                 data_len: SupportsIndex) -> None:
        if not isinstance(dtype, str):
            raise TypeError(f"argument 'dtype': '{type(dtype).__name__}' object is not an instance of 'str'")
        code = SPEC_DTYPES.get(dtype)
        if code is None:
            raise error("InvalidArgument", f'Unknown dtype "{dtype}". Supported dtypes: {", ".join(SPEC_DTYPES)}')
        dims = [_unsigned(d, "shape") for d in shape]
        if code == "F4" and dims:
            dims[-1] *= 2
        self._dtype, self._shape = code, dims
        self._data_ptr = _unsigned(data_ptr, "data_ptr")
        self._data_len = _unsigned(data_len, "data_len")

    @property
    def dtype(self) -> str:
        """The safetensors dtype code ("F32", "BF16", ...)."""
        return self._dtype

    @property
    def shape(self) -> list[int]:
        """The shape as the header records it."""
        return list(self._shape)

    @property
    def data_ptr(self) -> int:
        """Address of the tensor's contiguous bytes."""
        return self._data_ptr

    @property
    def data_len(self) -> int:
        """Length of those bytes."""
        return self._data_len

    def __repr__(self) -> str:
        return (f"TensorSpec(dtype={self._dtype!r}, shape={self._shape}, data_ptr={self._data_ptr}, "
                f"data_len={self._data_len})")


def _described(tensor_dict: Any) -> list[DescribedTensor]:
    if not isinstance(tensor_dict, dict):
        raise TypeError(f"argument 'tensor_dict': '{type(tensor_dict).__name__}' object is not a dict")
    out = []
    for name, spec in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"argument 'tensor_dict': tensor names must be str, got {name!r}")
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"argument 'tensor_dict': '{type(spec).__name__}' object is not an instance of "
                            f"'TensorSpec' (tensor '{name}')")
        count = 1
        for d in spec.shape:
            count *= d
        bits = count * BITS[spec.dtype]
        if bits % 8 or bits // 8 != spec.data_len:
            raise error("TensorInvalidInfo", f"Error while serializing: tensor '{name}' ({spec.dtype} "
                                             f"{spec.shape}) needs {bits / 8:g} bytes, data_len is {spec.data_len}")
        if spec.data_len and not spec.data_ptr:
            raise error("InvalidArgument", f"Error while serializing: tensor '{name}' has data_ptr 0 and "
                                           f"{spec.data_len} bytes")
        out.append(DescribedTensor(name, spec.dtype, spec.shape, spec.data_ptr, spec.data_len))
    return out


def check_metadata(metadata):
    """``metadata`` when it is None or a dict of str to str (what every writer
    takes), else TypeError naming what is wrong. The binding refuses the same
    with the same words (for ringsafe.lowlevel's callers)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict of str to str, got {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must map str to str: {k!r}: {v!r}")
    return metadata


def serialize(tensor_dict: dict[str, TensorSpec], metadata: Metadata | None = None) -> bytes:
    """The safetensors bytes of {name: TensorSpec}, in the reference's layout."""
    return _serialize_described(_described(tensor_dict), check_metadata(metadata))


def serialize_file(tensor_dict: dict[str, TensorSpec], filename: StrPath, metadata: Metadata | None = None) -> None:
    """Writes {name: TensorSpec} to ``filename`` (str or os.PathLike) in the
    reference's layout, straight from the given memory, GIL released; the file
    appears whole or not at all."""
    if not isinstance(filename, (str, bytes, os.PathLike)):
        raise TypeError(f"argument 'filename': expected str, bytes or os.PathLike, got {type(filename).__name__}")
    save_declared(os.fsdecode(filename), _described(tensor_dict), check_metadata(metadata), False, 2, None)


def parse_checked_bytes(data: object) -> ParsedHeader:
    """parse_bytes(data) for the loads of bytes (deserialize, load): bytes,
    bytearray or a C-contiguous memoryview only, refused with the
    reference's TypeError before any byte is read."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"argument 'bytes': '{type(data).__name__}' object is not an instance of 'bytes'")
    if not memoryview(data).c_contiguous:
        raise TypeError(f"argument 'bytes': a strided or reversed {type(data).__name__} is not contiguous bytes "
                        f"(copy it first, e.g. bytes(view))")
    return parse_bytes(data)


def deserialize(data: bytes | bytearray | memoryview) -> list[tuple[str, dict[str, Any]]]:
    """[(name, {"dtype", "shape", "data": bytearray})] of safetensors bytes
    (any C-contiguous bytes-like object), in data order (the reference's order
    varies from run to run)."""
    parsed = parse_checked_bytes(data)
    start = parsed.data_start
    view = memoryview(data).cast("B")
    return [(t.name, {"dtype": t.dtype, "shape": list(t.shape), "data": bytearray(view[start + t.begin:start + t.end])})
            for t in parsed.tensors]

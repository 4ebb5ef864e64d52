"""The NumPy adapter (_frameworks.Adapter): zero-copy views of a buffer, fresh
destinations and descriptions of caller arrays, in safetensors terms. NumPy
has no bfloat16, float8 or float4 types: such tensors raise SafetensorError
naming them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._dtypes import NUMPY_NAMES, check_dims, unsupported
from ._errors import error
from ._described import CallerTensor, FreshTensor
from ._memory import ARENA_MIN_BYTES, ViewItem, new_arena

_TYPES = {name: np.dtype(attr).newbyteorder("<") for name, attr in NUMPY_NAMES.items()}
_NAMES = {np.dtype(attr): name for name, attr in NUMPY_NAMES.items()}


class _NumpyAdapter:
    framework = "np"
    tensor_type = "np.ndarray"

    def check_device(self, device):
        if device != "cpu":
            raise error("InvalidArgument", f"Device {device} is not supported for framework numpy")
        return device

    def _type(self, dtype, name):
        t = _TYPES.get(dtype)
        if t is None:
            raise unsupported(dtype, "numpy", name)
        return t

    def check_dtype(self, dtype, shape, name):
        self._type(dtype, name)
        check_dims(shape, "numpy", name)

    def shape_of(self, dtype: str, shape: Sequence[int], name: str) -> list[int]:
        """The NumPy shape of a file tensor: the file's (after check_dtype's checks)."""
        self.check_dtype(dtype, shape, name)
        return list(shape)

    def views(self, arena, items):
        out = {}
        for it in items:
            t = self._type(it.dtype, it.name)
            check_dims(it.shape, "numpy", it.name)
            if it.nbytes == 0:
                out[it.name] = np.empty(it.shape, dtype=t)
            else:
                out[it.name] = np.frombuffer(arena, dtype=t, count=it.nbytes // t.itemsize,
                                             offset=it.offset).reshape(it.shape)
        return out

    def dtype_of(self, array):
        """The safetensors dtype code of an array's dtype (either byte order), or None."""
        return _NAMES.get(array.dtype.newbyteorder("="))

    def empty(self, dtype, shape, device, name):
        """A new array of the file's dtype and shape (``device`` is "cpu": check_device)."""
        t = self._type(dtype, name)
        check_dims(shape, "numpy", name)
        return np.empty(shape, dtype=t)

    def fresh(self, dtype: str, shape: Sequence[int], nbytes: int, name: str) -> FreshTensor:
        """The FreshTensor of new memory for one array."""
        t = self._type(dtype, name)
        check_dims(shape, "numpy", name)
        if nbytes >= ARENA_MIN_BYTES:
            v = self.views(new_arena(nbytes), [ViewItem(name, 0, dtype, shape, nbytes)])[name]
        else:
            v = np.empty(shape, dtype=t)
        return FreshTensor(v, v.ctypes.data)

    def check_type(self, obj, name):
        if not isinstance(obj, np.ndarray):
            raise ValueError(f"Key `{name}` is invalid, expected np.ndarray but received {type(obj)}")

    def is_sparse(self, obj):
        return False

    def describe(self, obj: Any, name: str, for_write: bool = True) -> CallerTensor:
        """The CallerTensor of a caller's array, in safetensors terms."""
        self.check_type(obj, name)
        if not for_write and not obj.flags.writeable:
            raise ValueError(f"read_into needs a writable array: `{name}` is read-only")
        if not obj.flags.c_contiguous:
            if not for_write:
                raise ValueError(f"read_into needs a C-contiguous array: `{name}` is not")
            obj = np.ascontiguousarray(obj)
        if obj.dtype.byteorder == ">":
            if not for_write:
                raise ValueError(f"read_into needs a little-endian array: `{name}` is big-endian")
            obj = obj.astype(obj.dtype.newbyteorder("<"))
        dtype = self.dtype_of(obj)
        if dtype is None:
            raise ValueError(f"array `{name}`: numpy dtype {obj.dtype} has no safetensors dtype")
        return CallerTensor(dtype, list(obj.shape), obj.ctypes.data, obj.nbytes, obj)

    def byte_view(self, obj):
        """A writable uint8 view of a described (C-contiguous, writable) array's bytes."""
        return obj.reshape(-1).view(np.uint8)

    def shared_groups(self, tensors):
        return []  # as the reference: arrays are saved as they are

    def index(self, box_array, relative, flips):
        if flips:
            box_array = np.flip(box_array, flips)
        out = box_array[relative] if relative else box_array
        return np.array(out, order="C", copy=True)  # keeps a 0-d result 0-d

    def to_device(self, a, device):
        return a


ADAPTER = _NumpyAdapter()

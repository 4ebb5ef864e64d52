"""ringsafe for NumPy: the ``safetensors.numpy`` API on ringsafe's engine,
plus read_into, iter_tensors, select= and URLs. NumPy has no bfloat16, float8
or float4 types: such tensors raise SafetensorError naming them."""

import numpy as np

from . import _load, _write
from ._dtypes import NUMPY_NAMES, check_dims, error, unsupported
from ._frameworks import ARENA_MIN_BYTES
from ._ringsafe import Arena

_TYPES = {name: np.dtype(attr).newbyteorder("<") for name, attr in NUMPY_NAMES.items()}
_NAMES = {np.dtype(attr): name for name, attr in NUMPY_NAMES.items()}


class _NumpyAdapter:
    framework = "np"

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

    def views(self, arena, items):
        out = {}
        for name, off, dtype, shape, nbytes in items:
            t = self._type(dtype, name)
            check_dims(shape, "numpy", name)
            if nbytes == 0:
                out[name] = np.empty(shape, dtype=t)
            else:
                out[name] = np.frombuffer(arena, dtype=t, count=nbytes // t.itemsize, offset=off).reshape(shape)
        return out

    def fresh(self, dtype, shape, nbytes, name):
        t = self._type(dtype, name)
        check_dims(shape, "numpy", name)
        if nbytes >= ARENA_MIN_BYTES:
            v = self.views(Arena(nbytes), [(name, 0, dtype, shape, nbytes)])[name]
        else:
            v = np.empty(shape, dtype=t)
        return v, v.ctypes.data

    def describe(self, obj, name, for_write=True):
        if not isinstance(obj, np.ndarray):
            raise ValueError(f"Key `{name}` is invalid, expected np.ndarray but received {type(obj)}")
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
        dtype = _NAMES.get(obj.dtype.newbyteorder("="))
        if dtype is None:
            raise ValueError(f"array `{name}`: numpy dtype {obj.dtype} has no safetensors dtype")
        return dtype, list(obj.shape), obj.ctypes.data, obj.nbytes, obj

    def storage_key(self, obj):
        return None

    def index(self, box_array, relative, flips):
        if flips:
            box_array = np.flip(box_array, flips)
        out = box_array[relative] if relative else box_array
        return np.array(out, order="C", copy=True)  # keeps a 0-d result 0-d

    def to_device(self, a, device):
        return a


ADAPTER = _NumpyAdapter()


def load_file(filename, *, select=None, progress=None, **options):
    """Loads a checkpoint (path, URL, s3://, or index) into {name: array}: one
    parallel read into one huge-page arena, every array a view of it."""
    return _load.load_file(ADAPTER, filename, "cpu", select, progress, options)


def load(data):
    """Loads safetensors bytes into {name: array} (one copy of the data)."""
    return _load.load_bytes(ADAPTER, data, "cpu")


def read_into(filename, arrays, *, progress=None, **options):
    """Fills existing C-contiguous arrays {name: array} in place; dtypes and
    sizes checked for all of them before any I/O."""
    return _load.read_into(ADAPTER, filename, arrays, progress, options)


def iter_tensors(filename, *, select=None, memory_limit=1 << 30, progress=None, **options):
    """Yields (name, array) in data order as reads complete, with at most
    ``memory_limit`` bytes of staging (see ringsafe.torch.iter_tensors)."""
    return _load.iter_tensors(ADAPTER, filename, select, memory_limit, "cpu", progress, options)


def save(tensor_dict, metadata=None):
    """The safetensors bytes of {name: array} (the reference's layout)."""
    return _write.save_bytes(ADAPTER, tensor_dict, metadata)


def save_file(tensor_dict, filename, metadata=None, *, sync=False, progress=None):
    """Writes {name: array} to ``filename`` byte-identical to the reference,
    straight from the arrays' memory; published atomically."""
    _write.save_file(ADAPTER, tensor_dict, filename, metadata, sync, progress)

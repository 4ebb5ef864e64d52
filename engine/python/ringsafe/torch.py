"""ringsafe for PyTorch: the ``safetensors.torch`` API on ringsafe's engine,
plus what that API lacks (URLs, S3, sharded indexes, select=, read_into,
iter_tensors, progress, the GIL released throughout).

Switching is an import: ``from ringsafe.torch import load_file, save_file``.
"""

import torch

from . import _load, _model, _write
from ._dtypes import TORCH_NAMES, check_dims, error, unsupported
from ._frameworks import ARENA_MIN_BYTES
from ._ringsafe import Arena

_TYPES = {name: getattr(torch, attr) for name, attr in TORCH_NAMES.items() if hasattr(torch, attr)}
_NAMES = {dt: name for name, dt in _TYPES.items()}
_F4 = _TYPES.get("F4")


class _TorchAdapter:
    framework = "pt"

    def check_device(self, device):
        if isinstance(device, int):
            device = f"cuda:{device}"
        try:
            return torch.device(device)
        except (RuntimeError, TypeError):
            raise error("InvalidArgument", f"device {device} is invalid") from None

    def _type(self, dtype, shape, name):
        t = _TYPES.get(dtype)
        if t is None:
            raise unsupported(dtype, "torch", name)
        check_dims(shape, "torch", name)
        if dtype == "F4":
            if not shape or shape[-1] % 2:
                raise error("InvalidArgument",
                            f"tensor '{name}': F4 is float4_e2m1fn_x2 in torch, two per byte: the last "
                            f"dimension must be even, got {list(shape)}")
            shape = list(shape[:-1]) + [shape[-1] // 2]
        return t, list(shape)

    def check_dtype(self, dtype, shape, name):
        self._type(dtype, shape, name)

    def views(self, arena, items):
        """{name: tensor} of zero-copy views; items are (name, offset, dtype, shape, nbytes)."""
        base = torch.frombuffer(arena, dtype=torch.uint8) if len(arena) else None
        out = {}
        for name, off, dtype, shape, nbytes in items:
            t, s = self._type(dtype, shape, name)
            if nbytes == 0:
                out[name] = torch.empty(s, dtype=t)
            else:
                out[name] = base[off:off + nbytes].view(t).view(s)
        return out

    def fresh(self, dtype, shape, nbytes, name):
        """(tensor, address) of new memory for one tensor."""
        t, s = self._type(dtype, shape, name)
        if nbytes >= ARENA_MIN_BYTES:
            v = self.views(Arena(nbytes), [(name, 0, dtype, shape, nbytes)])[name]
        else:
            v = torch.empty(s, dtype=t)
        return v, v.data_ptr()

    def describe(self, obj, name, for_write=True):
        """(dtype, shape, address, nbytes, owner) of a caller's tensor, in safetensors terms."""
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(obj)}")
        if obj.layout != torch.strided:
            raise ValueError(f"You are trying to save a sparse tensor: `{name}` which ringsafe does not support;"
                             " make it dense with `.to_dense()` first")
        if not obj.is_contiguous():
            raise ValueError(f"You are trying to {'save' if for_write else 'read into'} a non contiguous tensor:"
                             f" `{name}` which is not allowed; call `.contiguous()` on it first")
        dtype = _NAMES.get(obj.dtype)
        if dtype is None:
            raise ValueError(f"tensor `{name}`: torch dtype {obj.dtype} has no safetensors dtype")
        if obj.device.type != "cpu":
            if not for_write:
                raise ValueError(f"tensor `{name}` is on {obj.device}: read_into fills CPU tensors")
            obj = obj.to("cpu")
        shape = list(obj.shape)
        if dtype == "F4":
            if not shape:
                raise ValueError(f"tensor `{name}`: a 0-d float4_e2m1fn_x2 holds two F4 values and has no "
                                 f"safetensors shape; give it a last dimension")
            shape[-1] *= 2
        return dtype, shape, obj.data_ptr(), obj.numel() * obj.element_size(), obj

    def storage_key(self, obj):
        """(start, end) of the storage bytes ``obj`` covers, for shared-memory checks."""
        if obj.device.type == "meta" or obj.numel() == 0:
            return None
        return obj.untyped_storage().data_ptr(), obj.untyped_storage().nbytes()

    def index(self, box_tensor, relative, flips):
        packed = box_tensor.dtype == _F4  # torch has no flip/index kernels for it: move its bytes as uint8
        base = box_tensor.view(torch.uint8) if packed else box_tensor
        if flips:
            base = base.flip(flips)
        out = base[relative] if relative else base
        if not (out.is_contiguous() and out.data_ptr() == box_tensor.data_ptr()):
            out = out.contiguous()
        return out.view(_F4) if packed else out

    def to_device(self, t, device):
        return t if device.type == "cpu" else t.to(device)


ADAPTER = _TorchAdapter()


def load_file(filename, device="cpu", *, select=None, progress=None, **options):
    """Loads a checkpoint (path, URL, s3://, or index) into {name: tensor}.

    One parallel read into one huge-page arena; every tensor is a zero-copy view
    of it, and the arena is freed when the last view is gone. ``select`` takes
    names and globs; ``progress`` a callable(done, total) or True for tqdm;
    ``options`` the Reader's (threads, connections, token, ...)."""
    return _load.load_file(ADAPTER, filename, device, select, progress, options)


def load(data, device="cpu"):
    """Loads safetensors bytes into {name: tensor} (one copy of the data)."""
    return _load.load_bytes(ADAPTER, data, device)


def read_into(filename, tensors, *, progress=None, **options):
    """Fills existing CPU tensors {name: tensor} in place from the checkpoint,
    with no intermediate copy. Dtypes and sizes are checked for all of them
    before any I/O (SafetensorError naming the tensor)."""
    return _load.read_into(ADAPTER, filename, tensors, progress, options)


def iter_tensors(filename, *, select=None, memory_limit=1 << 30, device="cpu", progress=None, **options):
    """Yields (name, tensor) in data order as reads complete, reading ahead
    while the consumer works, with at most ``memory_limit`` bytes of staging
    (each tensor must fit in it). A yielded tensor is a view of its batch's
    arena, freed once the consumer drops the batch's tensors."""
    return _load.iter_tensors(ADAPTER, filename, select, memory_limit, device, progress, options)


def save(tensors, metadata=None):
    """The safetensors bytes of {name: tensor} (the reference's layout)."""
    return _write.save_bytes(ADAPTER, tensors, metadata)


def save_file(tensors, filename, metadata=None, *, sync=False, progress=None):
    """Writes {name: tensor} to ``filename``, byte-identical to the reference's
    save_file, straight from the tensors' memory with parallel writes. The file
    appears whole or not at all (temporary + rename); sync=True also fsyncs."""
    _write.save_file(ADAPTER, tensors, filename, metadata, sync, progress)


def load_model(model, filename, strict=True, device="cpu", *, progress=None, **options):
    """Loads a checkpoint into a model's parameters and buffers in place: one
    parallel read straight into their memory. Returns (missing, unexpected) as
    the reference does; with strict=True a mismatch raises RuntimeError before
    any byte is read."""
    return _model.load_model(model, filename, strict, device, progress, options)


def save_model(model, filename, metadata=None, force_contiguous=True, *, sync=False):
    """Saves a model's state_dict, writing tensors that share memory once (the
    dropped names go into the metadata, as the reference does)."""
    _model.save_model(model, filename, metadata, force_contiguous, sync)

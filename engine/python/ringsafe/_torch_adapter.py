"""The torch adapter (_frameworks.Adapter): what the loaders and writers need
from torch (zero-copy views of a buffer, fresh destinations, descriptions of
caller tensors, devices), in safetensors terms. Imports torch, the dtype
tables, the arena allocator (_memory) and _described's records; _shared
when shared_groups runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._dtypes import TORCH_NAMES, check_dims, unsupported
from ._errors import error
from ._described import CallerTensor, FreshTensor
from ._memory import ARENA_MIN_BYTES, ViewItem, new_arena

_TYPES = {name: getattr(torch, attr) for name, attr in TORCH_NAMES.items() if hasattr(torch, attr)}
_NAMES = {dt: name for name, dt in _TYPES.items()}
_F4 = _TYPES.get("F4")


class _TorchAdapter:
    framework = "pt"
    tensor_type = "torch.Tensor"  # as the reference's messages name it

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

    def shape_of(self, dtype: str, shape: Sequence[int], name: str) -> list[int]:
        """The torch shape of a file tensor (F4: the last dimension halved, two values a byte)."""
        return self._type(dtype, shape, name)[1]

    def views(self, buffer, items):
        """{name: tensor} of zero-copy views of ``buffer`` (an Arena or MappedFile);
        items are ViewItems. Each tensor gets a storage of its own bytes that
        keeps the buffer alive (as the reference's tensors do: torch.save of one
        writes only it; storage_ptr/size describe it)."""
        out = {}
        for it in items:
            t, s = self._type(it.dtype, it.shape, it.name)
            if it.nbytes == 0:
                out[it.name] = torch.empty(s, dtype=t)
            else:
                out[it.name] = torch.frombuffer(buffer, dtype=t, count=it.nbytes // t.itemsize,
                                                offset=it.offset).view(s)
        return out

    def bytes_as(self, raw, dtype, shape, name):
        """The uint8 tensor ``raw`` (one tensor's bytes, on any device) viewed as
        the file's ``dtype`` and ``shape``; an empty tensor on raw's device when it
        holds no bytes."""
        t, s = self._type(dtype, shape, name)
        return raw.view(t).view(s) if raw.numel() else torch.empty(s, dtype=t, device=raw.device)

    def dtype_of(self, tensor):
        """The safetensors dtype name of a torch tensor's dtype, or None."""
        return _NAMES.get(tensor.dtype)

    def empty(self, dtype, shape, device, name):
        """A new tensor of the file's dtype and shape on ``device`` (device memory for the engine to fill)."""
        t, s = self._type(dtype, shape, name)
        return torch.empty(s, dtype=t, device=device)

    def fresh(self, dtype: str, shape: Sequence[int], nbytes: int, name: str) -> FreshTensor:
        """The FreshTensor of new memory for one tensor."""
        t, s = self._type(dtype, shape, name)
        if nbytes >= ARENA_MIN_BYTES:
            v = self.views(new_arena(nbytes), [ViewItem(name, 0, dtype, shape, nbytes)])[name]
        else:
            v = torch.empty(s, dtype=t)
        return FreshTensor(v, v.data_ptr())

    def check_type(self, obj, name):
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(obj)}")

    def is_sparse(self, obj):
        return obj.layout != torch.strided

    def describe(self, obj: Any, name: str, for_write: bool = True) -> CallerTensor:
        """The CallerTensor of a caller's tensor, in safetensors terms.
        A conjugate or negative view (t.conj(), t._neg_view()) shares the bytes of
        the tensor it views, its values are those bytes conjugated or negated: a
        write takes the values it shows (resolved into a copy, the owner), a
        read_into destination is refused (the bytes read would show changed)."""
        self.check_type(obj, name)
        if obj.layout != torch.strided:
            raise ValueError(f"You are trying to save a sparse tensors: `{[name]}` which this library does not"
                             " support. You can make it a dense tensor before saving with `.to_dense()` but be"
                             " aware this might make a much larger file than needed.")
        if not obj.is_contiguous():
            if for_write:
                raise ValueError(f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It"
                                 " either means you are trying to save tensors which are reference of each other in"
                                 " which case it's recommended to save only the full tensors, and reslice at load"
                                 " time, or simply call `.contiguous()` on your tensor to pack it before saving.")
            raise ValueError(f"You are trying to read into a non contiguous tensor: `{name}` which is not allowed;"
                             " call `.contiguous()` on it first")
        if obj.is_conj() or obj.is_neg():
            view = "a conjugate" if obj.is_conj() else "a negative"
            if not for_write:
                raise ValueError(f"tensor `{name}` is {view} view: its bytes are another tensor's, shown "
                                 f"{'conjugated' if obj.is_conj() else 'negated'}; read into that tensor, or into "
                                 f"`.resolve_conj()` / `.resolve_neg()` of it")
            obj = obj.resolve_conj().resolve_neg()  # the values it shows, in bytes of their own
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
        return CallerTensor(dtype, shape, obj.data_ptr(), obj.numel() * obj.element_size(), obj)

    def byte_view(self, obj):
        """A writable uint8 NumPy array over a described (contiguous, CPU)
        tensor's bytes, sharing its memory; None where NumPy cannot view them
        (a tensor with its conjugate or negative bit set)."""
        t = obj.detach()
        if t.is_conj() or t.is_neg():
            return None
        return t.reshape(-1).view(torch.uint8).numpy()

    def shared_groups(self, tensors):
        """Groups of names whose tensors' bytes overlap (what save_file refuses)."""
        from ._shared import shared_groups
        dense = {k: v for k, v in tensors.items() if isinstance(v, torch.Tensor) and v.layout == torch.strided}
        return shared_groups(dense)

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

"""Which adapter serves a framework name or a tensor object, what an
adapter is (Adapter; its describe() returns _described.CallerTensor, its
fresh() a FreshTensor). The adapters (_torch_adapter, _numpy_adapter) import
only their framework, the dtype tables (_dtypes), the arena allocator
(_memory) and _described's records, never _frameworks or the loaders; the loaders reach them through
adapter_for / adapter_of, or import the torch adapter directly where only
torch applies (load_model, the distributed loads, device loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._described import CallerTensor, FreshTensor
from ._errors import error

if TYPE_CHECKING:
    from collections.abc import Sequence


class Adapter(Protocol):
    """What the loaders and writers need from a framework, in safetensors terms
    (dtype codes such as "F32", shapes as lists of int). Both adapters have
    every method; where NumPy has no notion (devices, sparse layouts, shared
    storage) its answer is the trivial one."""

    framework: str    # "pt" or "np", as safe_open's framework= names it
    tensor_type: str  # how the reference's messages name the type ("torch.Tensor")

    def check_device(self, device):
        """``device`` in the framework's form, or SafetensorError for one it cannot hold."""

    def check_dtype(self, dtype, shape, name):
        """SafetensorError naming tensor ``name`` when the framework cannot hold ``dtype``/``shape``."""

    def shape_of(self, dtype: str, shape: Sequence[int], name: str) -> list[int]:
        """The shape a tensor of the file's ``dtype`` and ``shape`` has in the
        framework (torch's F4 packs two values a byte: the last dimension
        halved); SafetensorError naming tensor ``name`` as check_dtype."""
        ...

    def dtype_of(self, tensor):
        """The safetensors dtype code of a tensor of this framework, or None."""

    def views(self, buffer, items):
        """{name: tensor} of zero-copy views of ``buffer`` (an Arena or MappedFile);
        items are _memory.ViewItem records (_memory.packed_items makes them)."""

    def empty(self, dtype, shape, device, name):
        """A new tensor of the file's dtype and shape on ``device``, for the engine to fill."""

    def fresh(self, dtype: str, shape: Sequence[int], nbytes: int, name: str) -> FreshTensor:
        """The FreshTensor (tensor, address) of new host memory for one tensor of ``nbytes`` bytes."""
        ...

    def check_type(self, obj, name):
        """ValueError (the reference's words) when ``obj`` is not this framework's tensor."""

    def is_sparse(self, obj):
        """Whether ``obj`` has no dense layout (save_file refuses it)."""

    def describe(self, obj: Any, name: str, for_write: bool = True) -> CallerTensor:
        """The CallerTensor of a caller's tensor (a contiguous or converted copy
        of it when writing), or the reference's error for one it cannot take."""
        ...

    def byte_view(self, obj):
        """A writable uint8 NumPy array over a described tensor's bytes, or None."""

    def shared_groups(self, tensors):
        """Groups of names whose tensors' bytes overlap (what save_file refuses)."""

    def index(self, box_tensor, relative, flips):
        """A box read from a file, indexed by ``relative`` after flipping the dimensions ``flips``."""

    def to_device(self, t, device):
        """``t`` on ``device`` (itself when it is there already)."""


_TORCH = ("pt", "torch", "pytorch")
_NUMPY = ("np", "numpy")


def adapter_for(framework: str) -> Adapter:
    """The adapter for a framework name, as safe_open() accepts them."""
    if framework in _TORCH:
        from ._torch_adapter import ADAPTER
        return ADAPTER
    if framework in _NUMPY:
        from ._numpy_adapter import ADAPTER  # type: ignore[assignment]  # no common type
        return ADAPTER
    raise error("InvalidArgument", f"framework {framework} is invalid (ringsafe supports pt, torch, pytorch, np, numpy)")


def adapter_of(obj):
    """The adapter whose tensor type ``obj`` is (for writers), or None."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        from ._torch_adapter import ADAPTER
        return ADAPTER
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        from ._numpy_adapter import ADAPTER  # type: ignore[assignment]  # no common type
        return ADAPTER
    return None

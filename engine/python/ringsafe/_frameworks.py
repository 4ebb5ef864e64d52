"""What the loaders need from a framework (torch or NumPy): zero-copy views of
an Arena, fresh destinations, descriptions of caller tensors, devices. The
adapters live in ringsafe.torch and ringsafe.numpy; this module finds them."""

from ._dtypes import error

_TORCH = ("pt", "torch", "pytorch")
_NUMPY = ("np", "numpy")

# Destinations of at least this many bytes come from a huge-page Arena.
ARENA_MIN_BYTES = 2 << 20


def adapter_for(framework):
    """The adapter for a framework name, as safe_open() accepts them."""
    if framework in _TORCH:
        from .torch import ADAPTER
        return ADAPTER
    if framework in _NUMPY:
        from .numpy import ADAPTER
        return ADAPTER
    raise error("InvalidArgument", f"framework {framework} is invalid (ringsafe supports pt, torch, pytorch, np, numpy)")


def adapter_of(obj):
    """The adapter whose tensor type ``obj`` is (for writers), or None."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        from .torch import ADAPTER
        return ADAPTER
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        from .numpy import ADAPTER
        return ADAPTER
    return None

"""Which adapter serves a framework name or a tensor object. The adapters
(_torch_adapter, _numpy_adapter) import nothing of the loaders, so the
arrows point one way: front ends -> loaders -> _frameworks -> adapters."""

from ._dtypes import error

_TORCH = ("pt", "torch", "pytorch")
_NUMPY = ("np", "numpy")


def adapter_for(framework):
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

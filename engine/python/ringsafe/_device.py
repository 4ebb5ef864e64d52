"""device="cuda:N": tensors read straight into device memory. The engine reads
each tensor's bytes into a ring of pinned staging buffers and copies them on a
CUDA stream to their place while the next reads run (ringsafe/device.hpp),
instead of loading into host memory and calling .to(device). The copies are
ordered against PyTorch's current stream of the device: they start after the
work queued on it (kernels still reading parameters being overwritten, memory
the caching allocator handed out again), and the work queued on it afterwards
starts after them.

RINGSAFE_DEVICE_STAND_IN=1 runs the same pipeline on a machine without a GPU
(the tests do): host memory plays the device, so "cuda:N" tensors come back on
the CPU, and no CUDA runtime is loaded."""

import os

from ._described import MemorySpan
from ._progress import progress_callback

STAND_IN = "RINGSAFE_DEVICE_STAND_IN"


def stand_in():
    """True when host memory plays the device (RINGSAFE_DEVICE_STAND_IN=1)."""
    return os.environ.get(STAND_IN, "") == "1"


_runtime = None


def _runtime_loads():
    global _runtime
    if _runtime is None:
        from ._ringsafe import cuda_runtime_available
        _runtime = cuda_runtime_available().available
    return _runtime


def applies(adapter, device):
    """Whether tensors for ``device`` are read straight into device memory (a
    CUDA device and a CUDA runtime ringsafe can load; otherwise the loaders
    fill host memory and move it with .to(device))."""
    return adapter.framework == "pt" and device.type == "cuda" and (stand_in() or _runtime_loads())


def _index(device):
    if device.index is not None or stand_in():
        return device.index or 0
    import torch
    return torch.cuda.current_device()


def stager(device):
    """A DeviceStager for ``device``: a staging ring kept across reads (what
    a handle reading one tensor, or one batch, at a time reuses)."""
    from ._ringsafe import DeviceStager
    return DeviceStager(device=_index(device), stand_in=stand_in())


def _stream(index):
    """PyTorch's current stream on CUDA device ``index`` as a cudaStream_t
    (an int; 0 is the legacy default stream), what the copies order against."""
    if stand_in():
        return 0
    import torch
    return torch.cuda.current_stream(index).cuda_stream


def read_into(reader, device, targets, *, progress, description, staging=None):
    """Reads {name: tensor} (contiguous, on ``device``, or on the CPU with the
    stand-in) straight from the file into the tensors' memory, through
    ``staging`` (a DeviceStager) when given, else a ring made for this call,
    ordered against PyTorch's current stream on the device."""
    from ._ringsafe import read_to_device_at
    names = [n for n, t in targets.items() if t.numel()]
    dsts = [MemorySpan(targets[n].data_ptr(), targets[n].numel() * targets[n].element_size()) for n in names]
    index = _index(device)
    with progress_callback(progress, description) as cb:
        read_to_device_at(reader, names, dsts, device=index, stand_in=stand_in(), progress=cb, stager=staging,
                          stream=_stream(index))


def load(adapter, reader, names, *, by_name, device, progress, description, staging=None):
    """{name: tensor} of ``names``, each a new tensor on ``device`` filled by the engine."""
    where = "cpu" if stand_in() else device
    out = {n: adapter.empty(by_name[n].dtype, by_name[n].shape, where, n) for n in names}
    read_into(reader, device, out, progress=progress, description=description, staging=staging)
    return out


def in_place(tensor, device):
    """Whether the engine fills ``tensor`` (a model's parameter) straight from
    the file: it is contiguous CUDA memory (with the stand-in, CPU memory when
    ``device`` is a CUDA device)."""
    if not tensor.is_contiguous():
        return False
    if stand_in():
        return device.type == "cuda" and tensor.device.type == "cpu"
    return tensor.device.type == "cuda" and _runtime_loads()

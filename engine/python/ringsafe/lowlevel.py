"""Raw-address calls of the engine: reads into memory given as integers.

Nothing here checks that an address is valid, writable, large enough or
still alive: a wrong one makes the engine write anywhere in the process. The
public API takes buffer objects instead (``Reader.plan_tensors(names,
[buffer])``, ``Reader.plan_requests([TensorRequest(name, box, buffer)])``),
checks their bounds and holds them while the engine writes. These are for code
that owns memory Python cannot describe as a buffer (device memory, a
framework's tensors) and keeps it alive itself (``keep`` is held by the plan).
Their destinations are records, read by name:

- ``plan_tensors_at(reader, names, [MemorySpan(address, size)], keep=[])``
- ``plan_requests_at(reader, [AddressedRequest(name, [(start, stop), ...], address, size)], keep=[])``
- ``read_to_device_at(reader, names, [MemorySpan(address, size)], device=0, stand_in=False,
  staging_size=16 MiB, staging_count=4, progress=None, stager=None, stream=0)``:
  CUDA destinations through pinned staging buffers, the copies ordered against
  the cudaStream_t ``stream`` (PyTorch's ``torch.cuda.current_stream().cuda_stream``).

The tuples of the same fields in the same order, ``(address, size)`` and
``(name, box, address, size)``, are also accepted (code written before the
records). A box stays a list of (start, stop) pairs, one per leading dimension.

    dst = torch.empty(8)
    plan = plan_tensors_at(reader, ["a"], [MemorySpan(dst.data_ptr(), 32)], keep=[dst])
    reader.execute(plan)

Plans run with ``reader.execute(plan)`` or ``reader.start(plan)``.
"""

from ._described import AddressedRequest, MemorySpan
from ._ringsafe import DeviceStager, plan_requests_at, plan_tensors_at, read_to_device_at

__all__ = ["plan_tensors_at", "plan_requests_at", "read_to_device_at", "DeviceStager", "MemorySpan",
           "AddressedRequest"]

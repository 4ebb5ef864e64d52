"""read_header: a .safetensors file's tensor entries, read straight from the
file; imported from beside them by bench_python.py and bench_gpu.py (which
tools/device_bundle.sh carries with this file into the GPU bundle)."""

import json
import struct


def read_header(path):
    """The header's JSON object (name -> {"dtype", "shape", "data_offsets"}), __metadata__ left out."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h

"""Shared setup for the Python tests: the package importable from the build
tree, the conformance folder, and small helpers.

- ``ringsafe`` is imported from ``<repo>/build/engine/python`` when it is not
  importable already (PYTHONPATH unset).
- ``CONFORMANCE`` is ``<repo>/../shared/conformance``, read where it stands
  (never copied or edited); ``conformance_cases(folder)`` lists its
  expected.jsonl entries ([] when absent, so parametrized tests are skipped),
  and the ``conformance_dir`` fixture skips a test when the folder is missing.
- ``evict(path)``: drops a file's pages from the page cache (fsync first: dirty
  pages are not dropped); ``warm(path)`` reads it whole, which leaves them there.
- ``raw_bytes(t)``: the little-endian bytes of a torch tensor or NumPy array,
  whatever its dtype (float8 and float4 included).
- ``write_checkpoint`` fixture: writes a dict of tensors (torch or NumPy) with
  the reference ``safetensors`` into ``tmp_path`` and returns the path.
"""

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_PACKAGE = ROOT / "build" / "engine" / "python"

try:
    import ringsafe  # noqa: F401
except ImportError:  # no PYTHONPATH: use the build tree's package
    sys.path.insert(0, str(BUILD_PACKAGE))

CONFORMANCE = ROOT.parent / "shared" / "conformance"


def conformance_cases(folder):
    """The expected.jsonl entries of valid/ or invalid/ ([] when absent)."""
    path = CONFORMANCE / folder / "expected.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def conformance_dir():
    """The conformance folder as it stands; skips the test when it is absent."""
    if not (CONFORMANCE / "valid" / "expected.jsonl").is_file():
        pytest.skip(f"conformance files not found at {CONFORMANCE}")
    return CONFORMANCE


def evict(path):
    """Drops ``path``'s pages from the page cache (written back first)."""
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path):
    """Reads ``path`` once, whole, which leaves its pages in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def raw_bytes(t):
    """The bytes of a tensor or array as safetensors stores them (C order, little-endian)."""
    import numpy as np

    if isinstance(t, np.ndarray):
        a = np.ascontiguousarray(t)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        return a.tobytes()
    import torch

    t = t.detach().cpu()
    if t.numel() == 0:
        return b""
    # A fresh copy with standard strides (a "contiguous" tensor may still have an odd
    # stride on a size-1 dimension, which view() refuses).
    flat = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


@pytest.fixture
def write_checkpoint(tmp_path):
    """write_checkpoint(tensors, name="model.safetensors", metadata=None) -> path,
    written by the reference (safetensors.torch or safetensors.numpy by the
    type of the first tensor; torch for an empty dict)."""

    def write(tensors, name="model.safetensors", metadata=None):
        import numpy as np

        path = tmp_path / name
        first = next(iter(tensors.values()), None)
        if isinstance(first, np.ndarray):
            import safetensors.numpy as ref
        else:
            import safetensors.torch as ref
        ref.save_file(tensors, str(path), metadata=metadata)
        return path

    return write

"""The safetensors API on a GGUF file: the reader tells the format by the
file's first bytes, and safe_open / load_file / load refuse a GGUF file with
an error that says so (whatever its name and backend), instead of reading its
blocks as safetensors tensors."""

import pathlib
import shutil

import pytest

import ringsafe
import ringsafe.numpy
import ringsafe.torch
from ringsafe._ringsafe import Reader

GGUF = pathlib.Path(__file__).resolve().parents[3] / "shared" / "conformance-gguf" / "valid"


@pytest.fixture
def gguf_file(tmp_path):
    src = GGUF / "type_Q4_K.gguf"
    if not src.is_file():
        pytest.skip(f"no GGUF corpus at {GGUF}")
    dst = tmp_path / "model.safetensors"  # a safetensors name: the bytes decide
    shutil.copyfile(src, dst)
    return dst


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_safetensors_api_refuses_gguf(gguf_file, backend):
    calls = [
        lambda: ringsafe.safe_open(str(gguf_file), framework="pt", backend=backend),
        lambda: ringsafe.torch.load_file(gguf_file, backend=backend),
        lambda: ringsafe.numpy.load_file(gguf_file, backend=backend),
    ]
    for call in calls:
        with pytest.raises(ringsafe.SafetensorError, match="is a GGUF file, not safetensors"):
            call()


def test_reader_says_the_format(gguf_file, write_checkpoint):
    r = Reader(str(gguf_file))
    assert r.format == "gguf"
    r.close()
    import numpy as np

    s = Reader(str(write_checkpoint({"w": np.zeros(3, dtype=np.float32)}, name="st.safetensors")))
    assert s.format == "safetensors"
    s.close()

"""ringsafe.Writer and save_file's refusals: files the reference reads back,
nothing left behind on failure, append, duplicates, the reference's errors."""

import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.torch as rpt
import safetensors
import safetensors.torch as spt
import torch


def _ref_read(path):
    with safetensors.safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def _equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _tensors():
    g = torch.Generator().manual_seed(3)
    return {
        "a": torch.randn(33, 7, generator=g),
        "b": torch.arange(100, dtype=torch.int32),
        "c": torch.randn(5, 5, generator=g).to(torch.bfloat16),
        "empty": torch.zeros(0, 4),
    }


def test_writer_read_back_by_reference(tmp_path):
    path = tmp_path / "w.safetensors"
    tensors = _tensors()
    with ringsafe.Writer(str(path), metadata={"format": "pt", "x": "1"}) as w:
        for k, v in tensors.items():
            w.write(k, v)
        w.write("np", np.arange(12, dtype=np.float64).reshape(3, 4))
    got, md = _ref_read(path)
    assert md == {"format": "pt", "x": "1"}
    assert sorted(got) == sorted(list(tensors) + ["np"])
    for k, v in tensors.items():
        assert _equal(got[k], v)
    assert _equal(got["np"], torch.arange(12, dtype=torch.float64).reshape(3, 4))


def test_writer_exception_leaves_nothing(tmp_path):
    path = tmp_path / "w.safetensors"
    with pytest.raises(KeyError):
        with ringsafe.Writer(str(path)) as w:
            w.write("a", torch.ones(1000))
            raise KeyError("boom")
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_writer_append(tmp_path):
    path = tmp_path / "w.safetensors"
    old = {"a": torch.arange(10, dtype=torch.float32), "b": torch.ones(3, 3, dtype=torch.int64)}
    with ringsafe.Writer(str(path), metadata={"m": "1"}) as w:
        for k, v in old.items():
            w.write(k, v)
    new = torch.arange(20, dtype=torch.float16).reshape(4, 5)
    with ringsafe.Writer(str(path), append=True) as w:
        w.write("c", new)
    got, _ = _ref_read(path)
    assert sorted(got) == ["a", "b", "c"]
    for k, v in old.items():
        assert _equal(got[k], v)
    assert _equal(got["c"], new)


def test_writer_append_without_header_room_keeps_file(tmp_path):
    # The reference's files reserve no header space: appending there is
    # refused with a clear error and the file stays as it was.
    path = tmp_path / "w.safetensors"
    spt.save_file({"a": torch.arange(10, dtype=torch.float32)}, str(path))
    before = path.read_bytes()
    with pytest.raises(ringsafe.SafetensorError):
        with ringsafe.Writer(str(path), append=True) as w:
            w.write("c", torch.ones(4, 5))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_writer_write_bytes(tmp_path):
    path = tmp_path / "w.safetensors"
    arr = np.arange(6, dtype="<f4").reshape(2, 3)
    with ringsafe.Writer(str(path)) as w:
        w.write_bytes("raw", "F32", [2, 3], arr.tobytes())
        w.write_bytes("bf", "BF16", (2,), bytes([0x80, 0x3F, 0x00, 0x40]))  # 1.0, 2.0
    got, _ = _ref_read(path)
    assert _equal(got["raw"], torch.from_numpy(arr))
    assert _equal(got["bf"], torch.tensor([1.0, 2.0], dtype=torch.bfloat16))


def test_writer_duplicate_name_then_usable(tmp_path):
    path = tmp_path / "w.safetensors"
    with ringsafe.Writer(str(path)) as w:
        w.write("a", torch.ones(4))
        with pytest.raises(Exception, match="a"):
            w.write("a", torch.zeros(4))
        w.write("b", torch.full((2,), 5.0))
    got, _ = _ref_read(path)
    assert sorted(got) == ["a", "b"]
    assert _equal(got["a"], torch.ones(4))
    assert _equal(got["b"], torch.full((2,), 5.0))


def _refusals():
    base = torch.zeros(10)
    return [
        ("noncontig", {"x": torch.zeros(4, 6).t()}, ValueError),
        ("shared", {"x": base, "y": base[2:]}, RuntimeError),
        ("nontensor", {"x": [1, 2, 3]}, ValueError),
        ("metadata", {"x": torch.zeros(2)}, TypeError),
    ]


@pytest.mark.parametrize("case", _refusals(), ids=lambda c: c[0])
def test_save_file_refusals_like_reference(tmp_path, case):
    name, tensors, exc = case
    metadata = {"k": 1} if name == "metadata" else None
    ref_path = tmp_path / "ref" / "x.safetensors"
    ref_path.parent.mkdir()
    with pytest.raises(exc):
        spt.save_file(tensors, str(ref_path), metadata=metadata)
    ours = tmp_path / "ours"
    ours.mkdir()
    path = ours / "x.safetensors"
    with pytest.raises(exc):
        rpt.save_file(tensors, str(path), metadata=metadata)
    assert os.listdir(ours) == []


@pytest.mark.parametrize("case", _refusals(), ids=lambda c: c[0])
def test_save_over_existing_keeps_old(tmp_path, case):
    name, tensors, exc = case
    metadata = {"k": 1} if name == "metadata" else None
    path = tmp_path / "x.safetensors"
    old = {"old": torch.arange(7, dtype=torch.int16)}
    spt.save_file(old, str(path))
    before = path.read_bytes()
    with pytest.raises(exc):
        rpt.save_file(tensors, str(path), metadata=metadata)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["x.safetensors"]

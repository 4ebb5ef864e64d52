"""ringsafe's GGUF save_file (ringsafe._gguf_write, re-exported by ringsafe.gguf).

Each file written is read back by gguf-py's GGUFReader and by ringsafe's
reader (the CLI's `ls --json`, and `cp` to safetensors for the tensor bytes),
metadata and tensors equal.
"""

import json
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402

import ringsafe  # noqa: E402
from ringsafe._gguf_write import Writer, save_file  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = ROOT / "build" / "tools" / "ringsafe"


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def ringsafe_listing(path):
    run = subprocess.run([str(CLI), "ls", str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_every_plain_dtype_and_value_type_reads_back_equal(tmp_path):
    tensors = {
        "f32": torch.randn(3, 4), "f16": torch.randn(2, 5).half(), "bf16": torch.randn(7).bfloat16(),
        "f64": torch.randn(2, 2, 2, dtype=torch.float64), "i8": torch.arange(-4, 4, dtype=torch.int8),
        "i16": torch.arange(6, dtype=torch.int16).reshape(3, 2), "i32": torch.tensor([1, -2], dtype=torch.int32),
        "i64": torch.tensor([[2**40]]), "np": np.arange(12, dtype=np.float32).reshape(2, 3, 2),
        "scalar": torch.tensor(1.5),
    }
    metadata = {
        "general.architecture": "llama", "count": 5, "wide": 2**40, "ratio": 0.5, "flag": True,
        "tokens": ["a", "Ġb", ""], "ids": [1, -2, 3], "u64": ("UINT64", 2**64 - 1), "exact": ("FLOAT64", 0.1),
        "u8s": ("ARRAY", "UINT8", [1, 255]), "typed": (gguf.GGUFValueType.UINT16, 7),
    }
    path = tmp_path / "m.gguf"
    save_file(tensors, path, metadata)
    expect = {
        "general.architecture": ("STRING", "llama"), "count": ("INT32", 5), "wide": ("INT64", 2**40),
        "ratio": ("FLOAT32", 0.5), "flag": ("BOOL", True), "tokens": ("STRING", ["a", "Ġb", ""]),
        "ids": ("INT32", [1, -2, 3]), "u64": ("UINT64", 2**64 - 1), "exact": ("FLOAT64", 0.1),
        "u8s": ("UINT8", [1, 255]), "typed": ("UINT16", 7),
    }
    r = gguf.GGUFReader(path)
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert keys == list(metadata)
    for key, (type_name, value) in expect.items():
        f = r.fields[key]
        assert f.types[-1].name == type_name, key
        assert f.contents() == value, key
    got = {t.name: t for t in r.tensors}
    assert list(got) == list(tensors)
    for name, t in tensors.items():
        t = torch.from_numpy(t) if isinstance(t, np.ndarray) else t
        assert [int(d) for d in got[name].shape][: t.dim()] == list(reversed(t.shape)) or t.dim() == 0
        assert got[name].data.tobytes() == raw(t), name
    # ringsafe's reader: the same entries and types; the bytes through a conversion.
    listing = ringsafe_listing(path)
    assert [(e["key"], e.get("element_type", e["type"])) for e in listing["metadata"]] == [
        (k, v[0]) for k, v in expect.items()
    ]
    back = tmp_path / "back.safetensors"
    assert subprocess.run([str(CLI), "cp", str(path), str(back), "--no-sync"], capture_output=True).returncode == 0
    for name, t in load_file(back).items():
        want = tensors[name]
        want = torch.from_numpy(want) if isinstance(want, np.ndarray) else want
        assert raw(t) == raw(want) and t.shape == want.shape, name


def test_alignment_is_recorded_and_honoured(tmp_path):
    path = tmp_path / "a.gguf"
    save_file({"x": torch.ones(3), "y": torch.ones(5)}, path, alignment=64)
    r = gguf.GGUFReader(path)
    assert r.fields["general.alignment"].contents() == 64
    assert all(t.data_offset % 64 == 0 for t in r.tensors)


@pytest.mark.parametrize(
    "tensors, metadata, what",
    [
        ({"b": torch.zeros(2, dtype=torch.bool)}, None, "'b'"),
        ({"u8": torch.zeros(2, dtype=torch.uint8)}, None, "'u8'"),
        ({"deep": torch.zeros(1, 1, 1, 1, 1)}, None, "'deep'"),
        ({"n" * 64: torch.zeros(1)}, None, "n" * 64),
        ({}, {"k": ("UINT8", 300)}, "'k'"),
        ({}, {"k": ("NOPE", 1)}, "NOPE"),
    ],
)
def test_what_gguf_cannot_hold_is_named_and_nothing_is_written(tmp_path, tensors, metadata, what):
    path = tmp_path / "bad.gguf"
    with pytest.raises(ringsafe.SafetensorError) as e:
        save_file(tensors, path, metadata)
    assert what in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_values_without_a_gguf_type_are_type_errors(tmp_path):
    with pytest.raises(TypeError, match="'k'"):
        save_file({}, tmp_path / "x.gguf", {"k": {"a": 1}})
    with pytest.raises(TypeError, match="one type"):
        save_file({}, tmp_path / "x.gguf", {"k": [1, "a"]})
    assert list(tmp_path.iterdir()) == []


def test_writer_streams_tensors_and_raw_blocks(tmp_path):
    import gguf_blocks

    path = tmp_path / "s.gguf"
    q4 = gguf_blocks.random_blocks("Q4_K", 4, np.random.default_rng(1))
    tensors = {"a": torch.randn(3, 8).bfloat16(), "n": np.arange(10, dtype=np.int32)}
    with Writer(path, {"general.architecture": "llama"}, reserve_bytes=4096) as w:
        for name, t in tensors.items():
            w.write(name, t)
        w.write_bytes("q", "Q4_K", [2, 512], q4.tobytes())
    assert w.stats["tensors"] == 3 and w.stats["relocation"] == ""
    r = gguf.GGUFReader(path)
    assert r.fields["general.architecture"].contents() == "llama"
    assert set(bytes(r.fields["ringsafe.padding"].contents(), "ascii")) <= {0x20}
    got = {t.name: t for t in r.tensors}
    assert got["a"].data.tobytes() == raw(tensors["a"])
    assert got["n"].data.tobytes() == tensors["n"].tobytes()
    assert got["q"].tensor_type.name == "Q4_K" and got["q"].data.tobytes() == q4.tobytes()
    assert [int(d) for d in got["q"].shape] == [512, 2]
    assert ringsafe_listing(path)["tensors"][2]["ne"] == [512, 2]


def test_writer_relocates_once_for_metadata_given_at_finish(tmp_path):
    path = tmp_path / "r.gguf"
    w = Writer(path, reserve_bytes=4096)
    w.write("x", torch.ones(1000))
    stats = w.finish({"tokenizer.ggml.tokens": [f"token{i}" for i in range(2000)]})
    assert stats["relocation"] in ("insert_range", "copy_file_range")
    r = gguf.GGUFReader(path)
    assert len(r.fields["tokenizer.ggml.tokens"].data) == 2000
    assert r.tensors[0].data.tobytes() == raw(torch.ones(1000))


def test_writer_leaves_nothing_on_an_exception(tmp_path):
    path = tmp_path / "x.gguf"
    with pytest.raises(RuntimeError):
        with Writer(path) as w:
            w.write("x", torch.ones(4))
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
    with Writer(path) as w:
        with pytest.raises(ringsafe.SafetensorError, match="'x'"):
            w.write_bytes("x", "Q4_K", [3], b"\0" * 4)
        w.abandon()
    assert list(tmp_path.iterdir()) == []

"""`ringsafe cp` between safetensors and GGUF, by the target's extension.

Each GGUF file cp writes is read back by gguf-py's GGUFReader (ggml's own
reader is not in the test environment: gguf-py and the conformance rules
stand in). Round trips: safetensors -> GGUF -> safetensors is byte-identical
in tensors for every plain dtype GGUF has; GGUF -> safetensors equals
gguf-py's dequantized values (float32 exactly; bfloat16/float16 as torch
rounds those float32 values).
"""

import json
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
from gguf import GGMLQuantizationType, quants  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import gguf_blocks  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = ROOT / "build" / "tools" / "ringsafe"

def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


PLAIN = {  # torch dtype -> GGUF type name
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
}


@pytest.fixture(autouse=True)
def _cli():
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")


def cp(*args, ok=True):
    run = subprocess.run([str(CLI), "cp", *map(str, args), "--no-sync"], capture_output=True, text=True, timeout=120)
    if ok:
        assert run.returncode == 0, run.stderr
    return run


def plain_tensors():
    g = torch.Generator().manual_seed(5)
    out = {}
    for i, (dt, _) in enumerate(PLAIN.items()):
        if dt.is_floating_point:
            t = torch.randn((3, 5, 2), generator=g).to(dt)
        else:
            t = torch.randint(-100, 100, (7, 2), generator=g).to(dt)
        out[f"w.{i}"] = t
    out["scalar"] = torch.tensor(2.5)
    out["four"] = torch.arange(24, dtype=torch.int16).reshape(1, 2, 3, 4)
    return out


def test_safetensors_to_gguf_and_back_is_byte_identical(tmp_path):
    tensors = plain_tensors()
    src, mid, back = tmp_path / "m.safetensors", tmp_path / "m.gguf", tmp_path / "back.safetensors"
    save_file(tensors, src, metadata={"format": "pt", "note": "größe"})
    cp(src, mid)
    r = gguf.GGUFReader(mid)
    assert r.fields["format"].contents() == "pt"
    assert r.fields["note"].contents() == "größe"
    got = {t.name: t for t in r.tensors}
    for name, t in tensors.items():
        g = got[name]
        assert g.tensor_type.name == PLAIN[t.dtype]
        assert [int(d) for d in g.shape][: t.dim()] == list(reversed(t.shape)) or t.dim() == 0
        assert g.data.tobytes() == raw(t)
    cp(mid, back)
    again = load_file(back)
    assert set(again) == set(tensors)
    for name, t in tensors.items():
        assert again[name].dtype == t.dtype and again[name].shape == t.shape
        assert raw(again[name]) == raw(t)
    with safe_open(back, "pt") as f:
        meta = f.metadata()
    assert json.loads(meta["gguf.format"]) == "pt"
    assert json.loads(meta["gguf.note"]) == "größe"


def quantized_gguf(path, types=("Q8_0", "Q4_K", "Q6_K", "IQ4_XS", "Q4_0")):
    rng = np.random.default_rng(3)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.context_length", 4096)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "Ġc"])
    w.add_float32("llama.rope.freq_base", 10000.0)
    expect = {}
    for i, name in enumerate(types):
        type_size = gguf_blocks.LAYOUT[name][1]
        rows, blocks_per_row = 3, 2 + i % 2
        blocks = gguf_blocks.random_blocks(name, rows * blocks_per_row, rng).reshape(rows, blocks_per_row * type_size)
        qt = GGMLQuantizationType[name]
        w.add_tensor(f"blk.{i}.weight", blocks, raw_dtype=qt)  # the byte shape: gguf-py derives ne
        expect[f"blk.{i}.weight"] = np.asarray(quants.dequantize(blocks, qt), dtype=np.float32)
    # 1.5 MB of Q8_0 (34-byte blocks): a 1M --buffer cuts it inside blocks.
    big = gguf_blocks.random_blocks("Q8_0", 32 * 1400, rng).reshape(32, 1400 * 34)
    w.add_tensor("big.weight", big, raw_dtype=GGMLQuantizationType.Q8_0)
    expect["big.weight"] = np.asarray(quants.dequantize(big, GGMLQuantizationType.Q8_0), dtype=np.float32)
    norm = rng.standard_normal(64).astype(np.float32)
    w.add_tensor("output_norm.weight", norm)
    expect["output_norm.weight"] = norm
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expect


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gguf_to_safetensors_equals_gguf_py_dequantized(tmp_path, dtype):
    src, out = tmp_path / "q.gguf", tmp_path / "q.safetensors"
    expect = quantized_gguf(src)
    # A small --buffer cuts tensors across batches: blocks cut between pieces are carried over.
    cp(src, out, "--dtype", dtype, "--buffer", "1M")
    got = load_file(out)
    want_dt = getattr(torch, dtype)
    for name, values in expect.items():
        t = got[name]
        ref = torch.from_numpy(values)
        if name == "output_norm.weight":  # plain F32 keeps its type
            assert t.dtype == torch.float32 and torch.equal(t, ref)
            continue
        assert t.dtype == want_dt
        assert t.shape == ref.shape
        assert torch.equal(t, ref.to(want_dt)), name
    with safe_open(out, "pt") as f:
        meta = f.metadata()
    assert json.loads(meta["gguf.general.architecture"]) == "llama"
    assert json.loads(meta["gguf.llama.context_length"]) == 4096
    assert json.loads(meta["gguf.tokenizer.ggml.tokens"]) == ["a", "b", "Ġc"]
    assert json.loads(meta["gguf.llama.rope.freq_base"]) == 10000.0


def test_gguf_to_gguf_keeps_blocks_and_metadata(tmp_path):
    src, out = tmp_path / "q.gguf", tmp_path / "copy.gguf"
    quantized_gguf(src)
    cp(src, out)
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(out)
    for key, field in a.fields.items():
        if key.startswith("GGUF."):
            continue
        assert b.fields[key].contents() == field.contents(), key
    assert [(t.name, t.tensor_type, list(t.shape)) for t in a.tensors] == [
        (t.name, t.tensor_type, list(t.shape)) for t in b.tensors
    ]
    for x, y in zip(a.tensors, b.tensors):
        assert x.data.tobytes() == y.data.tobytes(), x.name


@pytest.mark.parametrize(
    "tensors, what",
    [
        ({"ok": torch.zeros(2), "flags": torch.zeros(3, dtype=torch.bool)}, "'flags'"),
        ({"u8": torch.zeros(3, dtype=torch.uint8)}, "'u8'"),
        ({"deep": torch.zeros(1, 1, 1, 1, 2)}, "'deep'"),
        ({"n" * 64: torch.zeros(2)}, "n" * 64),
    ],
)
def test_what_gguf_cannot_hold_is_named_before_any_byte(tmp_path, tensors, what):
    src, out = tmp_path / "bad.safetensors", tmp_path / "bad.gguf"
    save_file(tensors, src)
    run = cp(src, out, ok=False)
    assert run.returncode == 1
    assert what in run.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.safetensors"]


def split_set(tmp_path, parts=3):
    """A split set as llama.cpp's gguf-split writes it: metadata in the first part, split.* in each."""
    rng = np.random.default_rng(9)
    tensors = {}
    for p in range(parts):
        path = tmp_path / f"m-{p + 1:05d}-of-{parts:05d}.gguf"
        w = gguf.GGUFWriter(str(path), "llama" if p == 0 else None)
        if p == 0:
            w.add_string("general.name", "split")
        w.add_uint16("split.no", p)
        w.add_uint16("split.count", parts)
        w.add_int32("split.tensors.count", 2 * parts)
        for k in range(2):
            name = f"blk.{p}.{k}"
            if k:
                data = gguf_blocks.random_blocks("Q4_K", 6, rng).reshape(2, 3 * 144)
                w.add_tensor(name, data, raw_dtype=GGMLQuantizationType.Q4_K)
            else:
                data = rng.standard_normal((4, 8)).astype(np.float32)
                w.add_tensor(name, data)
            tensors[name] = data.tobytes()
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return tmp_path / f"m-00001-of-{parts:05d}.gguf", tensors


def test_a_split_set_merges_into_one_gguf_file(tmp_path):
    first, tensors = split_set(tmp_path)
    out = tmp_path / "merged.gguf"
    cp(first, out, "--buffer", "1M")
    r = gguf.GGUFReader(out)
    assert not [k for k in r.fields if k.startswith("split.")]
    assert r.fields["general.name"].contents() == "split"
    assert [t.name for t in r.tensors] == list(tensors)
    for t in r.tensors:
        assert t.data.tobytes() == tensors[t.name], t.name


@pytest.mark.parametrize("flag, value, parts", [("--split-max-tensors", "2", 3), ("--split-max-size", "1K", 3)])
def test_a_gguf_file_splits_as_gguf_split_does_and_merges_back(tmp_path, flag, value, parts):
    first, tensors = split_set(tmp_path)
    whole = tmp_path / "whole.gguf"
    cp(first, whole)
    out = tmp_path / "s.gguf"
    cp(whole, out, flag, value)
    names = [tmp_path / f"s-{i + 1:05d}-of-{parts:05d}.gguf" for i in range(parts)]
    assert not out.exists()
    seen = []
    for i, name in enumerate(names):
        r = gguf.GGUFReader(name)
        assert r.fields["split.no"].contents() == i
        assert r.fields["split.count"].contents() == parts
        assert r.fields["split.tensors.count"].contents() == len(tensors)
        assert ("general.name" in r.fields) == (i == 0)  # the metadata in the first part, as gguf-split
        for t in r.tensors:
            assert t.data.tobytes() == tensors[t.name]
            seen.append(t.name)
    assert seen == list(tensors)
    merged = tmp_path / "merged.gguf"
    cp(names[0], merged)
    a, b = gguf.GGUFReader(whole), gguf.GGUFReader(merged)
    assert [(t.name, t.data.tobytes()) for t in a.tensors] == [(t.name, t.data.tobytes()) for t in b.tensors]
    assert [k for k in a.fields] == [k for k in b.fields]


def test_gguf_to_a_sharded_safetensors_checkpoint_with_its_index(tmp_path):
    src = tmp_path / "q.gguf"
    expect = quantized_gguf(src)
    out = tmp_path / "model.safetensors"
    cp(src, out, "--max-shard-size", "2M")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 3 and files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert not out.exists()
    got = {}
    for f in files:
        got.update(load_file(tmp_path / f))
        with safe_open(tmp_path / f, "pt") as h:
            assert json.loads(h.metadata()["gguf.general.architecture"]) == "llama"
    assert set(got) == set(expect) == set(index["weight_map"])
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in got.values())
    for name, values in expect.items():
        assert torch.equal(got[name], torch.from_numpy(values)), name
    # ringsafe's reader opens the index as one checkpoint
    run = subprocess.run([str(CLI), "ls", str(tmp_path / "model.safetensors.index.json"), "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def peak_rss(*args):
    run = cp(*args, "--json")
    return json.loads(run.stdout)["peak_rss_kib"] * 1024


def test_conversions_stream_in_bounded_memory(tmp_path):
    """Peak RSS of each conversion stays within --buffers x --buffer plus a constant
    (the writer's 48 MiB of staging, the program), far below the files' sizes."""
    rng = np.random.default_rng(4)
    src = tmp_path / "big.gguf"
    w = gguf.GGUFWriter(str(src), "llama")
    for i in range(8):  # 8 x 24 MiB of Q8_0 blocks: 360 MiB of bf16 out
        blocks = gguf_blocks.random_blocks("Q8_0", 740 * 1000, rng).reshape(1000, 740 * 34)
        w.add_tensor(f"blk.{i}.weight", blocks, raw_dtype=GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    bound = 2 * (4 << 20) + (112 << 20)
    st = tmp_path / "big.safetensors"
    assert peak_rss(src, st, "--dtype", "bfloat16", "--buffer", "4M", "--buffers", "2") < bound
    assert st.stat().st_size > 3 * bound
    assert peak_rss(st, tmp_path / "back.gguf", "--buffer", "4M", "--buffers", "2") < bound
    assert peak_rss(src, tmp_path / "copy.gguf", "--buffer", "4M", "--buffers", "2") < bound


def edit(*args):
    return subprocess.run([str(CLI), "edit", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_edit_sets_and_deletes_keys_and_keeps_the_tensors(tmp_path):
    src = tmp_path / "q.gguf"
    quantized_gguf(src)
    before = gguf.GGUFReader(src)
    tensors = [(t.name, t.tensor_type, t.data.tobytes()) for t in before.tensors]
    run = edit(src, "--set", "general.name=Tiny", "--set", "llama.context_length=8192",
               "--set", "new.ratio=0.25:FLOAT64", "--delete", "llama.rope.freq_base")
    assert run.returncode == 0, run.stderr
    assert "rewrote" in run.stdout
    r = gguf.GGUFReader(src)
    assert r.fields["general.name"].contents() == "Tiny"
    assert r.fields["llama.context_length"].contents() == 8192
    assert r.fields["llama.context_length"].types[0].name == "UINT32"  # a replaced key keeps its type
    assert r.fields["new.ratio"].types[0].name == "FLOAT64" and r.fields["new.ratio"].contents() == 0.25
    assert "llama.rope.freq_base" not in r.fields
    assert r.fields["tokenizer.ggml.tokens"].contents() == ["a", "b", "Ġc"]
    assert [(t.name, t.tensor_type, t.data.tobytes()) for t in r.tensors] == tensors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.gguf"]


def test_edit_refusals_leave_the_file_unchanged(tmp_path):
    src = tmp_path / "q.gguf"
    quantized_gguf(src)
    old = src.read_bytes()
    assert edit(src, "--delete", "no.such.key").returncode == 1
    assert "UINT32" in edit(src, "--set", "llama.context_length=-1").stderr  # the type kept: a negative refused
    assert edit(src, "--set", "x=300:UINT8").returncode == 1
    assert edit(src).returncode == 2
    assert src.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.gguf"]


def test_kill_9_during_an_edit_leaves_the_old_file_or_the_new_one(tmp_path):
    import signal
    import time

    src = tmp_path / "e.gguf"
    w = gguf.GGUFWriter(str(src), "llama")
    rng = np.random.default_rng(6)
    for i in range(16):
        w.add_tensor(f"blk.{i}", rng.standard_normal(1 << 20).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    old = src.read_bytes()
    orig = tmp_path / "orig.gguf"
    orig.write_bytes(old)
    want = [t.data.tobytes() for t in gguf.GGUFReader(orig).tensors]
    olds = news = 0
    for k in range(12):
        src.write_bytes(old)
        p = subprocess.Popen([str(CLI), "edit", str(src), "--set", "general.name=edited"])
        time.sleep(k * k * 0.002)  # from before the start to after the end
        p.send_signal(signal.SIGKILL)
        p.wait()
        data = src.read_bytes()
        if data == old:
            olds += 1
            continue
        r = gguf.GGUFReader(src)
        assert r.fields["general.name"].contents() == "edited"
        assert [t.data.tobytes() for t in r.tensors] == want
        news += 1
    assert olds > 0  # the first kill comes before the rename

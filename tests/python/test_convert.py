"""``ringsafe.convert`` (also ``ringsafe.gguf.convert``): the engine's read/write
pipeline, ``ringsafe cp``'s, through the Python API, each direction.

Every GGUF file written is read back by gguf-py's ``GGUFReader`` (ggml's own
reader is not in the test environment: gguf-py and the conformance rules stand
in), every safetensors file by the reference ``safetensors``; GGUF ->
safetensors equals gguf-py's ``dequantize``. What the target cannot hold raises
before anything is written, and Ctrl-C (SIGINT to a child process converting)
raises KeyboardInterrupt with nothing left at the target.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
from gguf import GGMLQuantizationType  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import gguf_blocks  # noqa: E402
import ringsafe  # noqa: E402
import ringsafe.gguf  # noqa: E402
from servers import nginx_server, tls_ca  # noqa: E402, F401 - pytest fixtures
from test_gguf_convert import PLAIN, plain_tensors, quantized_gguf, raw, split_set  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def listing(d):
    return sorted(p.name for p in d.iterdir())


def test_one_implementation_under_both_names():
    assert ringsafe.gguf.convert is ringsafe.convert
    assert ringsafe.gguf.ConvertResult is ringsafe.ConvertResult


def test_safetensors_to_gguf_and_back_is_byte_identical(tmp_path):
    tensors = plain_tensors()
    src, mid, back = tmp_path / "m.safetensors", tmp_path / "m.gguf", tmp_path / "back.safetensors"
    save_file(tensors, src, metadata={"format": "pt", "note": "größe"})
    res = ringsafe.convert(src, mid, sync=False)
    assert res.files == (str(mid),) and res.tensors == len(tensors)
    assert res.bytes == sum(t.numel() * t.element_size() for t in tensors.values())
    r = gguf.GGUFReader(mid)
    assert r.fields["format"].contents() == "pt" and r.fields["note"].contents() == "größe"
    got = {t.name: t for t in r.tensors}
    for name, t in tensors.items():
        assert got[name].tensor_type.name == PLAIN[t.dtype]
        assert got[name].data.tobytes() == raw(t)
    res = ringsafe.gguf.convert(mid, back, sync=False)
    assert res.files == (str(back),)
    again = load_file(back)
    assert set(again) == set(tensors)
    for name, t in tensors.items():
        assert again[name].dtype == t.dtype and again[name].shape == t.shape
        assert raw(again[name]) == raw(t)
    with safe_open(back, "pt") as f:
        assert json.loads(f.metadata()["gguf.note"]) == "größe"


@pytest.mark.parametrize("dtype", ["float32", torch.bfloat16, "F16"])
def test_gguf_to_safetensors_equals_gguf_py_dequantized(tmp_path, dtype):
    src, out = tmp_path / "q.gguf", tmp_path / "q.safetensors"
    expect = quantized_gguf(src)
    seen = []
    # A 1 MiB buffer cuts tensors across batches: blocks cut between pieces are carried over.
    res = ringsafe.convert(src, out, dtype=dtype, buffer_size="1M", sync=False,
                           progress=lambda done, total: seen.append((done, total)))
    want = {"float32": torch.float32, torch.bfloat16: torch.bfloat16, "F16": torch.float16}[dtype]
    got = load_file(out)
    for name, values in expect.items():
        ref = torch.from_numpy(values)
        if name == "output_norm.weight":  # a plain F32 tensor keeps its type
            assert got[name].dtype == torch.float32 and torch.equal(got[name], ref)
            continue
        assert got[name].dtype == want and torch.equal(got[name], ref.to(want)), name
    with safe_open(out, "pt") as f:
        assert json.loads(f.metadata()["gguf.tokenizer.ggml.tokens"]) == ["a", "b", "Ġc"]
    assert seen and seen[-1] == (res.bytes, res.bytes)
    assert res.buffer_bytes == 1 << 20


def test_select_takes_globs(tmp_path):
    src, out = tmp_path / "q.gguf", tmp_path / "some.safetensors"
    quantized_gguf(src)
    res = ringsafe.convert(src, out, select=["blk.*", "output_norm.weight"], sync=False)
    assert sorted(load_file(out)) == ["blk.0.weight", "blk.1.weight", "blk.2.weight", "blk.3.weight", "blk.4.weight",
                                      "output_norm.weight"]
    assert res.tensors == 6
    ringsafe.convert(src, tmp_path / "one.gguf", select="big.weight", sync=False)
    assert [t.name for t in gguf.GGUFReader(tmp_path / "one.gguf").tensors] == ["big.weight"]


def test_a_split_set_merges_and_splits_back(tmp_path):
    first, tensors = split_set(tmp_path)
    merged = tmp_path / "merged.gguf"
    res = ringsafe.convert(first, merged, sync=False)  # any part opens the whole set
    assert res.files == (str(merged),)
    r = gguf.GGUFReader(merged)
    assert not [k for k in r.fields if k.startswith("split.")]
    assert [(t.name, t.data.tobytes()) for t in r.tensors] == list(tensors.items())
    res = ringsafe.convert(merged, tmp_path / "s.gguf", split_max_tensors=2, sync=False)
    parts = [str(tmp_path / f"s-{i:05d}-of-00003.gguf") for i in (1, 2, 3)]
    assert res.files == tuple(parts) and not (tmp_path / "s.gguf").exists()
    seen = []
    for i, p in enumerate(parts):
        r = gguf.GGUFReader(p)
        assert r.fields["split.no"].contents() == i and r.fields["split.count"].contents() == 3
        seen += [(t.name, t.data.tobytes()) for t in r.tensors]
    assert seen == list(tensors.items())


def test_a_sharded_safetensors_target_with_its_index(tmp_path):
    src = tmp_path / "q.gguf"
    expect = quantized_gguf(src)
    res = ringsafe.convert(src, tmp_path / "model.safetensors", max_shard_size="2M", sync=False)
    index = tmp_path / "model.safetensors.index.json"
    assert res.files[-1] == str(index) and len(res.files) >= 4
    weight_map = json.loads(index.read_text())["weight_map"]
    assert sorted(set(weight_map.values())) == [pathlib.Path(f).name for f in res.files[:-1]]
    got = {}
    for f in res.files[:-1]:
        got.update(load_file(f))
    for name, values in expect.items():
        assert torch.equal(got[name], torch.from_numpy(values)), name


@pytest.mark.parametrize(
    "tensors, what",
    [
        ({"ok": torch.zeros(2), "flags": torch.zeros(3, dtype=torch.bool)}, "'flags'"),  # a dtype GGUF lacks
        ({"deep": torch.zeros(1, 1, 1, 1, 2)}, "'deep'"),                               # more than 4 dimensions
        ({"n" * 64: torch.zeros(2)}, "n" * 64),                                          # over ggml's name limit
    ],
)
def test_what_gguf_cannot_hold_raises_before_any_byte(tmp_path, tensors, what):
    src, out = tmp_path / "bad.safetensors", tmp_path / "bad.gguf"
    save_file(tensors, src)
    with pytest.raises(ringsafe.SafetensorError) as e:
        ringsafe.convert(src, out)
    assert what in str(e.value) and e.value.kind == "InvalidArgument"
    assert listing(tmp_path) == ["bad.safetensors"]


def test_bad_options_raise_before_any_byte(tmp_path):
    src = tmp_path / "m.safetensors"
    save_file({"w": torch.zeros(4)}, src)
    with pytest.raises(ringsafe.SafetensorError, match="split_max_size"):
        ringsafe.convert(src, tmp_path / "out.safetensors", split_max_size=1 << 20)
    with pytest.raises(ringsafe.SafetensorError, match="max_shard_size"):
        ringsafe.convert(src, tmp_path / "out.gguf", max_shard_size="1G")
    with pytest.raises(ValueError, match="buffers"):
        ringsafe.convert(src, tmp_path / "out.gguf", buffers=1)
    with pytest.raises(ValueError, match="buffer_size"):
        ringsafe.convert(src, tmp_path / "out.gguf", buffer_size=4096)
    with pytest.raises(ValueError, match="size"):
        ringsafe.convert(src, tmp_path / "out.gguf", buffer_size="lots")
    with pytest.raises(ringsafe.SafetensorError, match="dtype"):
        ringsafe.convert(src, tmp_path / "out.safetensors", dtype="int8")
    with pytest.raises(ringsafe.SafetensorError, match="unknown reader option"):
        ringsafe.convert(src, tmp_path / "out.gguf", no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(ringsafe.SafetensorError) as e:
        ringsafe.convert(tmp_path / "missing.gguf", tmp_path / "out.safetensors")
    assert "missing.gguf" in str(e.value)
    assert listing(tmp_path) == ["m.safetensors"]


def test_a_gguf_file_over_http_lands_as_one_local_file(tmp_path, nginx_server):
    d = nginx_server.root / "convert"
    d.mkdir(exist_ok=True)
    expect = quantized_gguf(d / "q.gguf")
    out = tmp_path / "q.safetensors"
    res = ringsafe.convert(nginx_server.url("convert/q.gguf"), out, connections=4, buffer_size="1M", sync=False)
    assert res.readers == 2  # URLs: two readers, the connections split between them
    got = load_file(out)
    for name, values in expect.items():
        assert torch.equal(got[name], torch.from_numpy(values)), name


def test_a_remote_split_set_lands_as_one_local_file(tmp_path, nginx_server):
    d = nginx_server.root / "convert-split"
    d.mkdir(exist_ok=True)
    first, tensors = split_set(d)
    out = tmp_path / "merged.gguf"
    ringsafe.convert(nginx_server.url(f"convert-split/{first.name}"), out, buffer_size="1M", sync=False)
    r = gguf.GGUFReader(out)
    assert r.fields["general.name"].contents() == "split"
    assert [(t.name, t.data.tobytes()) for t in r.tensors] == list(tensors.items())


def test_safetensors_to_safetensors_reshards_a_selection(tmp_path):
    g = torch.Generator().manual_seed(2)
    tensors = {f"model.layers.{i}.weight": torch.randn(256, 256, generator=g) for i in range(6)}
    tensors["lm_head.weight"] = torch.randn(64, 256, generator=g).to(torch.bfloat16)
    src = tmp_path / "m.safetensors"
    save_file(tensors, src, metadata={"format": "pt"})
    res = ringsafe.convert(src, tmp_path / "out.safetensors", select="model.layers.*", max_shard_size=600_000,
                           sync=False)
    index = json.loads((tmp_path / "out.safetensors.index.json").read_text())
    assert len(res.files) == 4 and sorted(index["weight_map"]) == sorted(n for n in tensors if n.startswith("model"))
    for f in res.files[:-1]:
        with safe_open(f, "pt") as h:
            assert h.metadata() == {"format": "pt"}
            for name in h.keys():
                assert torch.equal(h.get_tensor(name), tensors[name])
    again = ringsafe.convert(tmp_path / "out.safetensors.index.json", tmp_path / "whole.safetensors", sync=False)
    assert again.tensors == 6 and set(load_file(tmp_path / "whole.safetensors")) == set(index["weight_map"])


CHILD = textwrap.dedent("""
    import json, os, sys
    import ringsafe

    src, out = sys.argv[1], sys.argv[2]
    def progress(done, total):
        if not progress.told:  # the conversion runs: the parent may interrupt it now
            progress.told = True
            print("RUNNING", flush=True)
    progress.told = False
    try:
        ringsafe.convert(src, out, dtype="bfloat16", buffer_size="4M", buffers=2, progress=progress)
        outcome = "completed"
    except KeyboardInterrupt:
        outcome = "interrupted"
    print("RESULT " + json.dumps({"outcome": outcome, "left": sorted(os.listdir(os.path.dirname(out)))}), flush=True)
""")


@pytest.fixture(scope="module")
def big_gguf(tmp_path_factory):
    """144 MiB of Q8_0 blocks (270 MiB of bf16 out): far from converted when SIGINT comes."""
    path = tmp_path_factory.mktemp("big") / "big.gguf"
    rng = np.random.default_rng(4)
    w = gguf.GGUFWriter(str(path), "llama")
    blocks = gguf_blocks.random_blocks("Q8_0", 740 * 1000, rng).reshape(1000, 740 * 34)
    for i in range(6):
        w.add_tensor(f"blk.{i}.weight", blocks, raw_dtype=GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing(tmp_path, big_gguf):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "build" / "engine" / "python") + os.pathsep + env.get("PYTHONPATH", "")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(big_gguf), str(out_dir / "big.safetensors")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "RUNNING", child.stderr.read()
        child.send_signal(signal.SIGINT)
        rest, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = [line for line in rest.splitlines() if line.startswith("RESULT ")]
    assert child.returncode == 0 and lines, err[-4000:]
    assert json.loads(lines[-1][len("RESULT "):]) == {"outcome": "interrupted", "left": []}
    assert listing(out_dir) == []

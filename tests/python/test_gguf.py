"""ringsafe.gguf against ggml's verdicts (../shared/conformance-gguf, read where
it stands) and against gguf-py (the `gguf` package, the reference Python reader):

- every valid case: version, alignment, data_offset, metadata (values and
  types, file order), tensor records, every tensor's stored bytes (sha256)
  and its float32 values (dequant_f32_sha256), from the file and over http://
  (the suite's nginx); where gguf-py opens the file, the same metadata as its
  ReaderField.contents() and the same records and bytes as its ReaderTensor;
- every invalid case: SafetensorError whose .kind is the corpus's error_kind;
- the split set as one model from a folder, http:// and hf:// (the Hub stand-in);
- a file made with gguf-py's GGUFWriter whose tensors span several staging
  batches: dequantized values equal gguf-py's dequantize, to F32, F16 and BF16;
- the errors (a missing tensor, a safetensors file, a dtype, a type ringsafe
  cannot dequantize, NumPy's missing bfloat16) before any I/O.
"""

import hashlib
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

import ringsafe
import ringsafe.gguf as rg
from ringsafe import _ringsafe
from servers import nginx_server, tls_ca  # noqa: F401 - pytest fixtures

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "conformance-gguf"


def cases(folder):
    path = CORPUS / folder / "expected.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


VALID = cases("valid")
INVALID = cases("invalid")
SPLIT_PARTS = sorted(c["file"] for c in VALID if c["file"].startswith("split_"))


def sha256(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def expected_value(case, entry):
    """The corpus's value as ringsafe gives it: ggml's C-string view of kv_string_nul
    is 'ab'; ringsafe keeps the file's 5 bytes 'ab\\0cd', as gguf-py does."""
    if case["file"] == "kv_string_nul.gguf":
        return "ab\x00cd"
    return entry["value"]


def check_header(f, case):
    assert f.version == case["version"]
    assert f.alignment == case["alignment"]
    assert f.data_offset == case["data_offset"]
    assert list(f.metadata) == [e["key"] for e in case["metadata"]]
    for e in case["metadata"]:
        assert f.metadata[e["key"]] == expected_value(case, e), e["key"]
        assert f.value_types[e["key"]] == (e["type"], e.get("element_type")), e["key"]
    records = [(t.name, t.type, list(t.shape), list(t.ne), t.offset, t.nbytes) for t in f.tensors]
    assert records == [(t["name"], t["type"], t["shape"], t["ne"], t["offset"], t["nbytes"]) for t in case["tensors"]]
    assert f.keys() == [t["name"] for t in case["tensors"]]


def check_tensors(f, case):
    raw = f.load(raw=True, framework="np")
    assert list(raw) == f.keys()
    for t in case["tensors"]:
        assert raw[t["name"]].dtype == np.uint8
        assert sha256(raw[t["name"]].tobytes()) == t["sha256"], t["name"]
        if t["dequant_f32_sha256"] is None:
            continue
        if not _ringsafe.can_dequantize(t["type"]):
            pytest.fail(f"ringsafe cannot dequantize {t['type']}, which ggml can")
        values = f.get_tensor(t["name"], dtype="F32", framework="np")
        assert values.dtype == np.float32 and list(values.shape) == t["shape"]
        assert sha256(values.tobytes()) == t["dequant_f32_sha256"], t["name"]
    # torch, every tensor with values in one call: the same values.
    with_values = {t["name"] for t in case["tensors"] if t["dequant_f32_sha256"] is not None}
    loaded = f.load(select=lambda t: t.name in with_values, dtype=torch.float32)
    for t in case["tensors"]:
        if t["dequant_f32_sha256"] is not None:
            assert sha256(loaded[t["name"]].numpy().tobytes()) == t["dequant_f32_sha256"]


@pytest.mark.parametrize("case", VALID, ids=[c["file"] for c in VALID])
def test_valid_case(case):
    with rg.open(CORPUS / "valid" / case["file"], split_set=False) as f:
        check_header(f, case)
        check_tensors(f, case)


@pytest.mark.parametrize("case", [c for c in VALID if c["gguf_py_ok"]],
                         ids=[c["file"] for c in VALID if c["gguf_py_ok"]])
def test_valid_case_as_gguf_py(case):
    path = CORPUS / "valid" / case["file"]
    ref = gguf.GGUFReader(path)
    with rg.open(path, split_set=False) as f:
        fields = {k: v for k, v in ref.fields.items() if not k.startswith("GGUF.")}
        assert list(f.metadata) == list(fields)
        for k, field in fields.items():
            assert f.metadata[k] == field.contents(), k
        if case["file"] != "shape_zero_tensors.gguf":  # gguf-py pads data_offset with no tensors (a quirk)
            assert f.data_offset == ref.data_offset
        assert len(f.tensors) == len(ref.tensors)
        if case["file"].startswith("type_Q8_1"):
            return  # gguf-py sizes a Q8_1 block at 40 bytes, ggml (and ringsafe) at 36 (a quirk)
        raw = f.load(raw=True, framework="np")
        for mine, theirs in zip(f.tensors, ref.tensors):
            assert (mine.name, mine.type, list(mine.ne), mine.nbytes) == \
                (theirs.name, theirs.tensor_type.name, [int(d) for d in theirs.shape], theirs.n_bytes)
            assert f.data_offset + mine.offset == theirs.data_offset
            assert raw[mine.name].tobytes() == theirs.data.tobytes()


@pytest.mark.parametrize("case", INVALID, ids=[c["file"] for c in INVALID])
def test_invalid_case(case):
    with pytest.raises(ringsafe.SafetensorError) as e:
        rg.open(CORPUS / "invalid" / case["file"])
    assert e.value.kind == case["error_kind"], str(e.value)
    assert case["file"] in str(e.value)


@pytest.fixture(scope="module")
def served(nginx_server):
    """The corpus under the suite's nginx (links to the files where they stand)."""
    link = nginx_server.root / "conformance-gguf"
    if not CORPUS.is_dir():
        pytest.skip(f"no GGUF corpus at {CORPUS}")
    if not link.exists():
        link.symlink_to(CORPUS, target_is_directory=True)
    return lambda name: nginx_server.url(f"conformance-gguf/{name}")


@pytest.mark.parametrize("case", VALID, ids=[c["file"] for c in VALID])
def test_valid_case_over_http(served, case):
    with rg.open(served("valid/" + case["file"]), split_set=False) as f:
        check_header(f, case)
        check_tensors(f, case)


def test_invalid_cases_over_http(served):
    for case in INVALID:
        with pytest.raises(ringsafe.SafetensorError) as e:
            rg.open(served("invalid/" + case["file"]))
        assert e.value.kind == case["error_kind"], (case["file"], str(e.value))


# ---------------------------------------------------------------- split sets

def split_reference():
    """{name: (raw bytes, float32 values or None)} over the parts, read with gguf-py."""
    out = {}
    for part in SPLIT_PARTS:
        for t in gguf.GGUFReader(CORPUS / "valid" / part).tensors:
            values = None
            if t.tensor_type.name not in ("F32", "F64", "I8", "I16", "I32", "I64"):
                values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            out[t.name] = (t.data.tobytes(), values)
    return out


def check_split(source, **options):
    if len(SPLIT_PARTS) != 3:
        pytest.skip(f"no split set in {CORPUS}")
    ref = split_reference()
    with rg.open(source, **options) as f:
        assert [t.shard for t in f.tensors] == [0, 0, 1, 1, 2, 2]
        assert f.metadata["split.count"] == 3 and f.metadata["split.no"] == 0
        assert f.keys() == list(ref)
        raw = f.load(raw=True, framework="np")
        assert {n: a.tobytes() for n, a in raw.items()} == {n: b for n, (b, _) in ref.items()}
    loaded = rg.load_file(source, **options)
    for name, (_, values) in ref.items():
        if values is not None:
            assert np.array_equal(loaded[name].numpy(), values.reshape(loaded[name].shape)), name


def test_split_set_from_a_folder(tmp_path):
    for part in SPLIT_PARTS:
        os.symlink(CORPUS / "valid" / part, tmp_path / part)
    check_split(tmp_path / SPLIT_PARTS[1])  # any part opens the set


def test_split_set_over_http(served):
    check_split(served("valid/" + SPLIT_PARTS[0]))


def test_split_set_over_the_hub(tmp_path, tmp_path_factory, monkeypatch):
    from servers import hub_environment
    with hub_environment(tmp_path_factory, monkeypatch, tmp_path / "cache") as hub:
        hub.add_repo("org/split", {p: CORPUS / "valid" / p for p in SPLIT_PARTS})
        check_split("hf://org/split/" + SPLIT_PARTS[2])


def test_split_set_with_a_part_missing(tmp_path):
    for part in SPLIT_PARTS[:2]:
        os.symlink(CORPUS / "valid" / part, tmp_path / part)
    with pytest.raises(ringsafe.SafetensorError, match="00003-of-00003"):
        rg.open(tmp_path / SPLIT_PARTS[0])


# ---------------------------------------------------------------- against gguf-py's dequantize

TYPES = ["Q8_0", "Q4_K", "Q6_K", "Q4_0", "Q5_K", "IQ4_XS", "MXFP4", "F16", "BF16"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A file of random blocks with finite scales (gguf_blocks), written by gguf-py."""
    from gguf_blocks import LAYOUT, random_blocks
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("gguf") / "random.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("test.value", 7)
    blocks = {}
    for i, t in enumerate(TYPES):
        per, size = LAYOUT[t]
        rows, cols = 3 + i, per * (2 + i % 3)
        b = random_blocks(t, rows * cols // per, rng)
        blocks[f"t.{t}"] = (t, b.reshape(rows, cols // per * size))
        w.add_tensor(f"t.{t}", blocks[f"t.{t}"][1], raw_dtype=gguf.GGMLQuantizationType[t])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, blocks


@pytest.mark.parametrize("staging", [None, 1, 4096])  # batches: one, one per tensor, a few
def test_dequantized_as_gguf_py(written, staging, monkeypatch):
    path, blocks = written
    ref = {n: gguf.quants.dequantize(b, gguf.GGMLQuantizationType[t]).astype(np.float32)
           for n, (t, b) in blocks.items()}
    with rg.open(path) as f:
        assert f.metadata["test.value"] == 7 and f.metadata["general.architecture"] == "llama"
        names = f.keys()
        for out, cast in (("F32", torch.float32), ("F16", torch.float16), ("BF16", torch.bfloat16)):
            dsts = [torch.empty(r.size, dtype=cast) for r in ref.values()]
            _ringsafe.gguf_read(f.reader, names, [d.view(torch.uint8).numpy() for d in dsts], [out] * len(names),
                                staging_bytes=staging)
            for d, r in zip(dsts, ref.values()):
                assert torch.equal(d, torch.from_numpy(r.reshape(-1)).to(cast))
        loaded = f.load()
        for n, r in ref.items():
            plain = blocks[n][0] in ("F16", "BF16")
            assert loaded[n].dtype == (torch.float16 if blocks[n][0] == "F16" else
                                       torch.bfloat16 if plain else torch.float32)
            assert torch.equal(loaded[n].float(), torch.from_numpy(r))


def test_select_and_dtypes(written):
    path, _ = written
    with rg.open(path) as f:
        assert list(f.load(select="t.Q*")) == ["t.Q8_0", "t.Q4_K", "t.Q6_K", "t.Q4_0", "t.Q5_K"]
        assert list(f.load(select=lambda t: t.type == "MXFP4")) == ["t.MXFP4"]
        assert f.get_tensor("t.Q8_0", dtype=torch.bfloat16).dtype == torch.bfloat16
        assert f.get_tensor("t.Q8_0", dtype=np.float16, framework="np").dtype == np.float16
        assert f.get_tensor("t.BF16", dtype="F32").dtype == torch.float32
        q = f.tensor("t.Q4_K")
        blocks = f.get_tensor("t.Q4_K", raw=True)
        assert blocks.dtype == torch.uint8 and blocks.shape == (q.shape[0], q.nbytes // q.shape[0])
    state = rg.load_file(path, select=["t.F16"], dtype="F32")
    assert list(state) == ["t.F16"] and state["t.F16"].dtype == torch.float32


def test_errors(written, tmp_path):
    path, _ = written
    with rg.open(path) as f:
        with pytest.raises(ringsafe.SafetensorError, match="tensor 'nope' not found") as e:
            f.get_tensor("nope")
        assert e.value.kind == "TensorNotFound"
        with pytest.raises(ringsafe.SafetensorError, match="float32, float16 or bfloat16") as e:
            f.get_tensor("t.Q8_0", dtype=torch.int8)
        assert e.value.kind == "InvalidArgument"
        with pytest.raises(ringsafe.SafetensorError, match="tensor 't.Q8_0': dtype BF16 has no numpy type"):
            f.get_tensor("t.Q8_0", dtype="BF16", framework="np")
        with pytest.raises(ringsafe.SafetensorError, match="tensor 't.BF16': dtype BF16 has no numpy type"):
            f.get_tensor("t.BF16", framework="np")
        with pytest.raises(ringsafe.SafetensorError, match="framework jax is invalid"):
            f.get_tensor("t.Q8_0", framework="jax")  # type: ignore[arg-type]
    import safetensors.torch as st
    st.save_file({"a": torch.zeros(2)}, tmp_path / "x.gguf")
    with pytest.raises(ringsafe.SafetensorError, match="x.gguf is not a GGUF file") as e:
        rg.open(tmp_path / "x.gguf")
    assert e.value.kind == "InvalidArgument"
    q81 = CORPUS / "valid" / "type_Q8_1.gguf"
    if q81.is_file():
        with rg.open(q81) as f:
            with pytest.raises(ringsafe.SafetensorError, match=r"\(Q8_1\): ringsafe cannot dequantize"):
                f.get_tensor(f.keys()[0])
            assert f.get_tensor(f.keys()[0], raw=True).dtype == torch.uint8


def test_a_closed_file(written):
    path, _ = written
    f = rg.open(path)
    f.close()
    with pytest.raises(ringsafe.SafetensorError, match="the reader is closed"):
        f.get_tensor("t.Q8_0")


def test_copy_of_a_part_alone(tmp_path):
    """split_set=False reads the part named alone; by default its missing siblings are an error."""
    if not SPLIT_PARTS:
        pytest.skip("no split set")
    shutil.copyfile(CORPUS / "valid" / SPLIT_PARTS[0], tmp_path / SPLIT_PARTS[0])
    with rg.open(tmp_path / SPLIT_PARTS[0], split_set=False) as f:
        assert [t.shard for t in f.tensors] == [0, 0]
    with pytest.raises(ringsafe.SafetensorError):
        rg.open(tmp_path / SPLIT_PARTS[0])


def test_interrupt_a_load_then_load_again(tmp_path):
    """Ctrl-C during load_file of a cold 256 MiB Q8_0 file: KeyboardInterrupt, no
    result, and the process loads the same file afterwards (in a subprocess)."""
    from test_interrupt import _run
    path = tmp_path / "big.gguf"
    rows, cols = 4096, 16384  # 64 Mi elements: 68 MiB of Q8_0 blocks per tensor, 4 tensors
    w = gguf.GGUFWriter(path, "llama")
    rng = np.random.default_rng(1)
    for i in range(4):
        blocks = rng.integers(0, 256, size=(rows * cols // 32, 34), dtype=np.uint8)
        blocks[:, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)  # finite scales
        w.add_tensor(f"t{i}", blocks.reshape(rows, -1), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    try:
        r = _run("""
            import ringsafe.gguf as rg
            path = sys.argv[1]
            make_cold(path)
            got = []
            state = interrupted(lambda: got.append(rg.load_file(path)))
            gc.collect()
            again = rg.load_file(path, select="t3")
            with rg.open(path) as f:
                same = torch.equal(again["t3"], f.get_tensor("t3"))
            result(state=state, got=len(got), shape=list(again["t3"].shape), same=same)
        """, path)
    finally:
        path.unlink(missing_ok=True)
    assert r == {"state": "interrupted", "got": 0, "shape": [rows, cols], "same": True}, r

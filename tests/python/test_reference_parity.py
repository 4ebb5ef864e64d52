"""Where ringsafe must agree with the reference safetensors, in one place:
every conformance file read as the reference reads it, save_file
byte-identical to the reference's, load_model as the reference's, slicing
equal to the framework's indexing, errors as the reference raises them."""

import hashlib
import json
import pathlib
import sys
import warnings

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.numpy as snp
import safetensors.torch as spt
import torch

CONFORMANCE = ROOT.parent / "shared" / "conformance"


def cases(folder):
    path = CONFORMANCE / folder / "expected.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def as_bytes(t):
    if isinstance(t, np.ndarray):
        return t.tobytes()
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def outcome(lib, path, framework):
    """What a library reports for a file: keys, metadata and per tensor (dtype, shape, bytes) or the error type."""
    try:
        with lib.safe_open(str(path), framework) as f:
            result = {"keys": f.keys(), "offset_keys": f.offset_keys(), "metadata": f.metadata(), "tensors": {}}
            for k in f.keys():
                try:
                    t = f.get_tensor(k)
                    result["tensors"][k] = (str(t.dtype), tuple(t.shape), as_bytes(t))
                except Exception as e:  # noqa: BLE001 - the reference raises several types here
                    result["tensors"][k] = ("refused", type(e).__name__)
            return result
    except Exception as e:  # noqa: BLE001
        return ("refused", type(e).__name__, e)


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("case", cases("valid"), ids=lambda c: c["file"])
def test_valid_file_reads_like_the_reference(case, framework):
    path = CONFORMANCE / "valid" / case["file"]
    mine, ref = outcome(ringsafe, path, framework), outcome(safetensors, path, framework)
    if case["file"].startswith("ok_duplicate"):
        # Deliberate difference: a header naming a tensor twice is refused, not "last wins".
        assert mine[0] == "refused" and mine[2].kind == "DuplicateTensorName"
        return
    assert not isinstance(mine, tuple), mine
    assert mine["keys"] == ref["keys"]
    # Data order as the conformance files define it (zero-size tensors at one offset by name);
    # the reference's binding orders such ties differently (empty_tensors_mixed).
    assert mine["offset_keys"] == [t["name"] for t in case["tensors"]]
    assert mine["metadata"] == ref["metadata"] == case["metadata"]
    expected = {t["name"]: t for t in case["tensors"]}
    for name, got in mine["tensors"].items():
        want = ref["tensors"][name]
        if want[0] == "refused":
            assert got[0] == "refused" and got[1] == "SafetensorError", (name, got)
            continue
        assert got == want, name
        if case["file"] != "shapes_subbyte_packing.safetensors" or expected[name]["dtype"] != "F4":
            assert hashlib.sha256(got[2]).hexdigest() == expected[name]["sha256"], name


@pytest.mark.parametrize("case", cases("invalid"), ids=lambda c: c["file"])
def test_invalid_file_is_refused_with_the_reference_kind(case):
    path = CONFORMANCE / "invalid" / case["file"]
    with pytest.raises(ringsafe.SafetensorError) as err:
        with ringsafe.safe_open(str(path), "np") as f:
            for k in f.keys():
                f.get_tensor(k)
    assert err.value.kind == case["error_kind"] or case["quirk"], (err.value.kind, case["error_kind"], str(err.value))
    assert str(path.name) in str(err.value)


def test_conformance_files_are_there():
    assert len(cases("valid")) > 50 and len(cases("invalid")) > 50


ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.int32, torch.uint32,
              torch.int64, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu]


def random_tensors(seed):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, dt in enumerate(ALL_DTYPES):
        shape = [int(x) for x in torch.randint(0, 5, (int(torch.randint(0, 4, (1,), generator=g)),), generator=g)]
        raw = torch.randint(0, 256, (int(np.prod(shape)) * torch.empty((), dtype=dt).element_size(),),
                            dtype=torch.uint8, generator=g)
        t = raw.view(dt).reshape(shape) if dt != torch.bool else (raw % 2).view(torch.bool).reshape(shape)
        out[f"t{i}.{str(dt).split('.')[-1]}·ü"] = t
    return out


@pytest.mark.parametrize("seed", range(6))
def test_save_file_is_byte_identical_and_round_trips(tmp_path, seed):
    tensors = random_tensors(seed)
    meta = {"seed": str(seed)}
    rpt.save_file(tensors, tmp_path / "mine.safetensors", metadata=meta)
    spt.save_file(tensors, tmp_path / "ref.safetensors", metadata=meta)
    assert (tmp_path / "mine.safetensors").read_bytes() == (tmp_path / "ref.safetensors").read_bytes()
    assert rpt.save(tensors, metadata=meta) == spt.save(tensors, metadata=meta)
    for loaded in (rpt.load_file(tmp_path / "ref.safetensors"), spt.load_file(tmp_path / "mine.safetensors"),
                   rpt.load(spt.save(tensors))):
        assert sorted(loaded) == sorted(tensors)
        for k, t in tensors.items():
            assert loaded[k].dtype == t.dtype and loaded[k].shape == t.shape and as_bytes(loaded[k]) == as_bytes(t)


def test_numpy_save_and_load_match_the_reference(tmp_path):
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array(7, dtype=np.int64),
              "c": np.zeros((0, 3), dtype=np.uint16), "d": np.array([1 + 2j], dtype=np.complex64)}
    rnp.save_file(arrays, tmp_path / "m.safetensors")
    snp.save_file(arrays, tmp_path / "r.safetensors")
    assert (tmp_path / "m.safetensors").read_bytes() == (tmp_path / "r.safetensors").read_bytes()
    loaded = rnp.load_file(tmp_path / "r.safetensors")
    assert all(np.array_equal(loaded[k], v) and loaded[k].dtype == v.dtype for k, v in arrays.items())
    assert all(np.array_equal(rnp.load(snp.save(arrays))[k], v) for k, v in arrays.items())


INDEXES = [(0,), (-1,), (slice(1, 3),), (slice(None), slice(None, None, 2)), (slice(None, None, -1),),
           (Ellipsis, slice(-3, None)), (None, 1), ([0, 2, 2],), (slice(5, 1, -2), Ellipsis, 0),
           (1, slice(100, None)), (slice(-100, 2),), ()]


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_get_slice_matches_numpy_indexing(tmp_path, framework):
    rng = np.random.default_rng(0)
    full = rng.standard_normal((6, 5, 4)).astype(np.float32)
    rnp.save_file({"x": full}, tmp_path / "x.safetensors")
    with ringsafe.safe_open(tmp_path / "x.safetensors", framework) as f:
        s = f.get_slice("x")
        assert s.get_shape() == [6, 5, 4] and s.get_dtype() == "F32"
        for index in INDEXES:
            got = s[index]
            got = got.numpy() if framework == "pt" else got
            assert np.array_equal(got, full[index]), index
        with pytest.raises(IndexError):
            s[6]
        with pytest.raises(IndexError):
            s[0, 0, 0, 0]


def test_errors_match_the_reference(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        ringsafe.safe_open(tmp_path / "nope.safetensors", "pt")
    rpt.save_file({"a": torch.zeros(2)}, tmp_path / "a.safetensors")
    f = ringsafe.safe_open(tmp_path / "a.safetensors", "pt")
    with pytest.raises(ringsafe.SafetensorError) as err:
        f.get_tensor("zz")
    assert err.value.kind == "TensorNotFound" and "zz" in str(err.value)
    f.close()
    with pytest.raises(ringsafe.SafetensorError, match="closed"):
        f.keys()
    with pytest.raises(ringsafe.SafetensorError, match="framework"):
        ringsafe.safe_open(tmp_path / "a.safetensors", "tf")
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(tmp_path / "a.safetensors", "np", device="cuda")
    with pytest.raises(ValueError, match="non contiguous"):
        rpt.save_file({"a": torch.zeros(4, 4)[:, :2]}, tmp_path / "b.safetensors")
    shared = torch.zeros(4)
    with pytest.raises(RuntimeError, match="share memory"):
        rpt.save_file({"a": shared, "b": shared}, tmp_path / "b.safetensors")
    with pytest.raises(TypeError):
        rpt.save_file({"a": torch.zeros(1)}, tmp_path / "b.safetensors", metadata={"k": 1})
    assert not (tmp_path / "b.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.safetensors"]  # no temporaries left


def test_load_model_fills_parameters_in_place(tmp_path):
    torch.manual_seed(0)
    src = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    spt.save_model(src, tmp_path / "m.safetensors")
    dst = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    before = {k: v.data_ptr() for k, v in dst.state_dict().items()}
    missing, unexpected = rpt.load_model(dst, tmp_path / "m.safetensors")
    assert (missing, unexpected) == (set(), [])
    for k, v in dst.state_dict().items():
        assert v.data_ptr() == before[k] and torch.equal(v, src.state_dict()[k])
    smaller = torch.nn.Sequential(torch.nn.Embedding(50, 8))
    with pytest.raises(RuntimeError, match="Unexpected key"):
        rpt.load_model(smaller, tmp_path / "m.safetensors")
    assert rpt.load_model(smaller, tmp_path / "m.safetensors", strict=False) == \
        spt.load_model(torch.nn.Sequential(torch.nn.Embedding(50, 8)), tmp_path / "m.safetensors", strict=False)


def test_get_slice_takes_boolean_masks_as_the_framework_does_and_huge_steps(tmp_path):
    full = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    rnp.save_file({"t": full}, tmp_path / "t.safetensors")
    for framework in ("np", "pt"):
        with ringsafe.safe_open(tmp_path / "t.safetensors", framework) as f:
            s = f.get_slice("t")
            # Masks, nested lists and 2-d index arrays: the whole tensor indexed by the
            # framework (as the reference's torch slices do), never rows 1, 0, 1.
            for index in ([True, False, True], (slice(None), np.array([True, False, False, True])),
                          [[0, 2], [1, 1]], np.array([[2, 0]])):
                with warnings.catch_warnings():  # torch's own deprecation of a nested list index
                    warnings.simplefilter("ignore")
                    got = s[index]
                    want = torch.from_numpy(full)[index] if framework == "pt" else None
                if framework == "pt":
                    assert torch.equal(got, want), index
                else:
                    assert np.array_equal(got, full[index]), index
            for index in ((slice(None, None, 2**63 - 1),), (slice(None, None, -2**63),), (slice(None, None, 2**64),)):
                got = s[index]
                assert np.array_equal(got.numpy() if framework == "pt" else got, full[index]), index


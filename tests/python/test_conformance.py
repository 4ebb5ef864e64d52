"""Every conformance file through ringsafe.safe_open and the reference's
safe_open (safetensors 0.8.0), for framework "pt" and "np".

A valid file must read the same in both: keys (sorted), offset_keys (data
order), metadata, and per tensor the dtype, shape and bytes (also checked
against expected.jsonl's sha256). Where the reference refuses one tensor for a
framework (NumPy has no bfloat16, float8 or float4; F6 has no type in either;
a dimension above 2^63 - 1), ringsafe must refuse it too, with a
SafetensorError naming the tensor (the reference raises TypeError,
AttributeError or ValueError for some of these).

An invalid file must be refused by both when opened, ringsafe with a
SafetensorError whose .kind is expected.jsonl's error_kind. That holds for the
files marked quirk: true in invalid/ as well.

Deliberate differences from the reference (asserted explicitly below):

- A tensor name defined more than once in a header (``ok_duplicate_*``: the
  same entry twice, a later entry replacing an earlier one, and ``"a"`` next
  to ``"\\u0061"``) is accepted by the reference, the last entry winning
  (quirk: true in valid/). ringsafe refuses such a file when it is opened,
  with SafetensorError kind "DuplicateTensorName" naming the tensor, for both
  frameworks and in load_file.
- offset_keys(): zero-size tensors sharing one offset are listed by name (as
  expected.jsonl orders them); the reference lists them in header order.
- Where the reference refuses a tensor with a non-SafetensorError (TypeError,
  AttributeError, ValueError), ringsafe raises SafetensorError.
"""

import hashlib

import numpy as np
import pytest
import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.numpy as snp
import safetensors.torch as spt
from conftest import CONFORMANCE, conformance_cases, raw_bytes

VALID = conformance_cases("valid")
INVALID = conformance_cases("invalid")
FRAMEWORKS = ["pt", "np"]

# Valid files (for the reference) that ringsafe refuses on purpose: repeated tensor names.
DUPLICATE_NAMES = {
    "ok_duplicate_tensor_identical.safetensors": "w",
    "ok_duplicate_tensor_last_wins.safetensors": "w",
    "ok_duplicate_via_escape.safetensors": "a",
}


def _ids(case):
    return case["file"]


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _reference_tensor(f, name):
    """(tensor, None) or (None, exception) from the reference's get_tensor."""
    try:
        return f.get_tensor(name), None
    except Exception as e:  # noqa: BLE001 - the reference raises several types here
        return None, e


def test_conformance_folder_is_there(conformance_dir):
    assert len(VALID) > 50 and len(INVALID) > 80
    for case in VALID:
        assert (conformance_dir / "valid" / case["file"]).is_file()
    for case in INVALID:
        assert (conformance_dir / "invalid" / case["file"]).is_file()
    assert set(DUPLICATE_NAMES) <= {c["file"] for c in VALID}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", [c for c in VALID if c["file"] not in DUPLICATE_NAMES], ids=_ids)
def test_valid_file_reads_like_the_reference(case, framework):
    path = str(CONFORMANCE / "valid" / case["file"])
    expected = {t["name"]: t for t in case["tensors"]}
    with ringsafe.safe_open(path, framework) as f, safetensors.safe_open(path, framework) as ref:
        assert f.keys() == sorted(expected) == ref.keys()
        order = [t["name"] for t in case["tensors"]]
        assert f.offset_keys() == order
        # The reference breaks ties between zero-size tensors at one offset by header order;
        # expected.jsonl (and ringsafe) by name. Otherwise the orders agree.
        ref_order = ref.offset_keys()
        assert sorted(ref_order, key=lambda n: (expected[n]["data_offsets"], n)) == order
        assert [expected[n]["data_offsets"] for n in ref_order] == [expected[n]["data_offsets"] for n in order]
        assert f.metadata() == case["metadata"] == ref.metadata()
        for name, want in expected.items():
            s = f.get_slice(name)
            assert s.get_dtype() == want["dtype"]
            assert s.get_shape() == want["shape"]
            ref_t, ref_err = _reference_tensor(ref, name)
            if ref_err is not None:
                # The reference has no type for it in this framework: ringsafe refuses it by name.
                with pytest.raises(ringsafe.SafetensorError, match=f"'{name}'"):
                    f.get_tensor(name)
                continue
            t = f.get_tensor(name)
            assert type(t) is type(ref_t)
            assert t.dtype == ref_t.dtype, name
            assert tuple(t.shape) == tuple(ref_t.shape), name
            data = raw_bytes(t)
            assert data == raw_bytes(ref_t), name
            assert _sha256(data) == want["sha256"], name
            begin, end = want["data_offsets"]
            assert len(data) == end - begin


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", [c for c in VALID if c["file"] in DUPLICATE_NAMES], ids=_ids)
def test_duplicate_tensor_names_are_refused_unlike_the_reference(case, framework):
    """Deliberate difference: the reference keeps the last entry, ringsafe refuses the file."""
    path = str(CONFORMANCE / "valid" / case["file"])
    name = DUPLICATE_NAMES[case["file"]]
    with safetensors.safe_open(path, framework) as ref:
        assert ref.keys() == [name] == [t["name"] for t in case["tensors"]]
        assert _sha256(raw_bytes(ref.get_tensor(name))) == case["tensors"][0]["sha256"]
    with pytest.raises(ringsafe.SafetensorError, match=f"'{name}'") as e:
        ringsafe.safe_open(path, framework)
    assert e.value.kind == "DuplicateTensorName"
    loader = rpt if framework == "pt" else rnp
    with pytest.raises(ringsafe.SafetensorError) as e:
        loader.load_file(path)
    assert e.value.kind == "DuplicateTensorName"


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", INVALID, ids=_ids)
def test_invalid_file_is_refused_like_the_reference(case, framework):
    path = str(CONFORMANCE / "invalid" / case["file"])
    with pytest.raises(safetensors.SafetensorError):
        safetensors.safe_open(path, framework)
    with pytest.raises(ringsafe.SafetensorError) as e:
        ringsafe.safe_open(path, framework)
    assert e.value.kind == case["error_kind"], str(e.value)
    assert str(e.value)  # a message, not an empty error
    loader = rpt if framework == "pt" else rnp
    with pytest.raises(ringsafe.SafetensorError) as e:
        loader.load_file(path)
    assert e.value.kind == case["error_kind"]


def _load_outcome(load, path):
    try:
        return load(path), None
    except Exception as e:  # noqa: BLE001
        return None, e


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", [c for c in VALID if c["file"] not in DUPLICATE_NAMES], ids=_ids)
def test_valid_file_load_file_equals_the_reference(case, framework):
    path = str(CONFORMANCE / "valid" / case["file"])
    ours, ref = (rpt, spt) if framework == "pt" else (rnp, snp)
    want, ref_err = _load_outcome(ref.load_file, path)
    if ref_err is not None:
        # Some tensor has no type in this framework: ringsafe refuses the load, naming one such tensor.
        with safetensors.safe_open(path, framework) as f:
            refused = [n for n in f.keys() if _reference_tensor(f, n)[1] is not None]
        assert refused
        with pytest.raises(ringsafe.SafetensorError) as e:
            ours.load_file(path)
        assert any(f"'{n}'" in str(e.value) for n in refused), str(e.value)
        return
    got = ours.load_file(path)
    assert list(got) == sorted(want)
    for name, t in want.items():
        assert type(got[name]) is type(t)
        assert got[name].dtype == t.dtype, name
        assert tuple(got[name].shape) == tuple(t.shape), name
        assert raw_bytes(got[name]) == raw_bytes(t), name
    expected = {t["name"]: t["sha256"] for t in case["tensors"]}
    assert {n: _sha256(raw_bytes(t)) for n, t in got.items()} == expected


@pytest.mark.parametrize("case", [c for c in VALID if c["file"] not in DUPLICATE_NAMES], ids=_ids)
def test_valid_file_load_bytes_equals_load_file(case):
    """ringsafe.torch.load / ringsafe.numpy.load on the file's bytes give what load_file gives."""
    path = CONFORMANCE / "valid" / case["file"]
    data = path.read_bytes()
    for ours in (rpt, rnp):
        from_file, err = _load_outcome(ours.load_file, str(path))
        if err is not None:
            assert isinstance(err, ringsafe.SafetensorError)
            with pytest.raises(ringsafe.SafetensorError):
                ours.load(data)
            continue
        from_bytes = ours.load(data)
        assert list(from_bytes) == list(from_file)
        for name, t in from_file.items():
            assert from_bytes[name].dtype == t.dtype
            assert tuple(from_bytes[name].shape) == tuple(t.shape)
            assert raw_bytes(from_bytes[name]) == raw_bytes(t)


def test_numpy_refusals_name_the_tensor_where_the_reference_raises_other_errors(conformance_dir):
    """all_dtypes.safetensors under "np": the reference fails bf16/f8/f4 with
    TypeError or AttributeError and F6 with SafetensorError; ringsafe raises
    SafetensorError naming the tensor for every one of them."""
    path = str(conformance_dir / "valid" / "all_dtypes.safetensors")
    refused = []
    with safetensors.safe_open(path, "np") as ref, ringsafe.safe_open(path, "np") as f:
        for name in f.keys():
            _, ref_err = _reference_tensor(ref, name)
            if ref_err is None:
                assert isinstance(f.get_tensor(name), np.ndarray)
                continue
            refused.append(name)
            with pytest.raises(ringsafe.SafetensorError, match=f"'{name}'"):
                f.get_tensor(name)
            with pytest.raises(ringsafe.SafetensorError, match=f"'{name}'"):
                f.get_slice(name)[...]
    assert sorted(refused) == sorted(["t_bf16", "t_f4", "t_f6_e2m3", "t_f6_e3m2", "t_f8_e4m3",
                                      "t_f8_e5m2", "t_f8_e8m0"])

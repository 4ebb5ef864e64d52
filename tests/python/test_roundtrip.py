"""Round trips between ringsafe and the reference (safetensors 0.8.0) on
random checkpoints (hypothesis): every dtype torch 2.13 can store, shapes with
zero-size dimensions and scalars, unicode names (control characters, quotes
and backslashes included), optional metadata.

- ringsafe.torch.save_file / save produce the reference's exact bytes (at most
  one metadata entry: the reference's metadata order is not fixed).
- A file written by either library loads in the other with equal dtypes,
  shapes, bytes and metadata (load_file, safe_open, and the bytes variants
  load/save).
- The same for NumPy (ringsafe.numpy vs safetensors.numpy), big-endian arrays
  included.
"""

import math

import numpy as np
import pytest
import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.numpy as snp
import safetensors.torch as spt
import torch
from conftest import raw_bytes
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# torch dtype -> safetensors dtype name, for every dtype torch 2.13 can save.
TORCH_DTYPES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.uint16: "U16",
    torch.int32: "I32", torch.uint32: "U32", torch.int64: "I64", torch.uint64: "U64",
    torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
    torch.complex64: "C64", torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2",
    torch.float8_e8m0fnu: "F8_E8M0", torch.float8_e4m3fnuz: "F8_E4M3FNUZ",
    torch.float8_e5m2fnuz: "F8_E5M2FNUZ", torch.float4_e2m1fn_x2: "F4",
}
# safetensors.torch.load (bytes) has no entry for these two (safe_open and load_file have).
NOT_IN_REFERENCE_LOAD_BYTES = {torch.float8_e8m0fnu, torch.float4_e2m1fn_x2}

NUMPY_DTYPES = {
    np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
    np.dtype(np.int16): "I16", np.dtype(np.uint16): "U16", np.dtype(np.int32): "I32",
    np.dtype(np.uint32): "U32", np.dtype(np.int64): "I64", np.dtype(np.uint64): "U64",
    np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
    np.dtype(np.complex64): "C64",
}

# Names: any unicode scalar values (no surrogates), except the reserved key.
names = st.text(st.characters(codec="utf-8"), max_size=12).filter(lambda n: n != "__metadata__")
shapes = st.lists(st.integers(0, 5), max_size=4)
metadata_values = st.text(st.characters(codec="utf-8"), max_size=10)
one_entry_metadata = st.one_of(st.none(), st.dictionaries(names, metadata_values, max_size=1))
any_metadata = st.one_of(st.none(), st.dictionaries(names, metadata_values, max_size=4))


def _random_bytes(n, seed, boolean):
    data = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    return (data & 1) if boolean else data


def _torch_tensor(dtype, shape, seed):
    """A tensor of its own storage with random bytes (F4: shape is the packed torch shape)."""
    item = torch.empty((), dtype=dtype).element_size() if dtype != torch.float4_e2m1fn_x2 else 1
    n = math.prod(shape) * item
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    data = _random_bytes(n, seed, dtype == torch.bool)
    flat = torch.from_numpy(data.copy())
    return flat.view(dtype).reshape(shape)


@st.composite
def torch_checkpoints(draw, max_size=6):
    entries = draw(st.dictionaries(names, st.tuples(st.sampled_from(sorted(TORCH_DTYPES, key=str)), shapes,
                                                    st.integers(0, 2**32 - 1)), max_size=max_size))
    out = {}
    for name, (dtype, shape, seed) in entries.items():
        if dtype == torch.float4_e2m1fn_x2 and not shape:
            shape = [1]  # a 0-d float4_e2m1fn_x2 has no safetensors shape (two values per byte)
        out[name] = _torch_tensor(dtype, shape, seed)
    return out


@st.composite
def numpy_checkpoints(draw, max_size=6):
    entries = draw(st.dictionaries(names, st.tuples(st.sampled_from(sorted(NUMPY_DTYPES, key=str)), shapes,
                                                    st.integers(0, 2**32 - 1), st.booleans()),
                                   max_size=max_size))
    out = {}
    for name, (dtype, shape, seed, big_endian) in entries.items():
        data = _random_bytes(math.prod(shape) * dtype.itemsize, seed, dtype == np.bool_)
        a = data.view(dtype).reshape(shape).copy()
        if big_endian and dtype.itemsize > 1:
            a = a.astype(dtype.newbyteorder(">"))  # same values, stored big-endian
        out[name] = a
    return out


def _reference_writes_broken_json(tensors, metadata):
    """The reference serializes no tensors with metadata {} as '{},"__metadata__":{}}',
    which no reader accepts (see test_empty_metadata_without_tensors)."""
    return not tensors and metadata == {}


def _assert_same_tensors(got, want):
    assert sorted(got) == sorted(want)
    for name, t in want.items():
        g = got[name]
        assert type(g) is type(t), name
        if isinstance(t, np.ndarray):
            assert g.dtype.newbyteorder("=") == t.dtype.newbyteorder("="), name
        else:
            assert g.dtype == t.dtype, name
        assert tuple(g.shape) == tuple(t.shape), name
        assert raw_bytes(g) == raw_bytes(t), name


@SETTINGS
@given(tensors=torch_checkpoints(), metadata=one_entry_metadata)
def test_torch_save_file_is_byte_identical_to_the_reference(tmp_path, tensors, metadata):
    assume(not _reference_writes_broken_json(tensors, metadata))
    ours, ref = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    rpt.save_file(tensors, str(ours), metadata=metadata)
    spt.save_file(tensors, str(ref), metadata=metadata)
    want = ref.read_bytes()
    assert ours.read_bytes() == want
    assert rpt.save(tensors, metadata=metadata) == want == spt.save(tensors, metadata=metadata)


@SETTINGS
@given(tensors=torch_checkpoints(), metadata=any_metadata)
def test_torch_files_load_in_the_other_library(tmp_path, tensors, metadata):
    ours, ref = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    rpt.save_file(tensors, str(ours), metadata=metadata)
    # Written by ringsafe, read by the reference.
    _assert_same_tensors(spt.load_file(str(ours)), tensors)
    with safetensors.safe_open(str(ours), "pt") as f:
        assert f.metadata() == metadata
        assert f.keys() == sorted(tensors)
    if _reference_writes_broken_json(tensors, metadata):
        return
    # Written by the reference, read by ringsafe (load_file and safe_open).
    spt.save_file(tensors, str(ref), metadata=metadata)
    _assert_same_tensors(rpt.load_file(str(ref)), tensors)
    with ringsafe.safe_open(str(ref), "pt") as f:
        assert f.metadata() == metadata
        _assert_same_tensors({n: f.get_tensor(n) for n in f.keys()}, tensors)
        _assert_same_tensors(f.get_tensors(), tensors)


@SETTINGS
@given(tensors=torch_checkpoints(), metadata=any_metadata)
def test_torch_bytes_load_in_the_other_library(tensors, metadata):
    if not _reference_writes_broken_json(tensors, metadata):
        _assert_same_tensors(rpt.load(spt.save(tensors, metadata=metadata)), tensors)
    data = rpt.save(tensors, metadata=metadata)
    _assert_same_tensors(rpt.load(data), tensors)
    if not any(t.dtype in NOT_IN_REFERENCE_LOAD_BYTES for t in tensors.values()):
        _assert_same_tensors(spt.load(data), tensors)


@SETTINGS
@given(tensors=numpy_checkpoints(), metadata=one_entry_metadata)
def test_numpy_save_file_is_byte_identical_to_the_reference(tmp_path, tensors, metadata):
    assume(not _reference_writes_broken_json(tensors, metadata))
    ours, ref = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    rnp.save_file(tensors, str(ours), metadata=metadata)
    snp.save_file(tensors, str(ref), metadata=metadata)
    want = ref.read_bytes()
    assert ours.read_bytes() == want
    assert rnp.save(tensors, metadata=metadata) == want == snp.save(tensors, metadata=metadata)


@SETTINGS
@given(tensors=numpy_checkpoints(), metadata=any_metadata)
def test_numpy_files_and_bytes_load_in_the_other_library(tmp_path, tensors, metadata):
    ours, ref = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    rnp.save_file(tensors, str(ours), metadata=metadata)
    _assert_same_tensors(snp.load_file(str(ours)), tensors)
    _assert_same_tensors(snp.load(rnp.save(tensors, metadata=metadata)), tensors)
    _assert_same_tensors(rnp.load(rnp.save(tensors, metadata=metadata)), tensors)
    with safetensors.safe_open(str(ours), "np") as f:
        assert f.metadata() == metadata
    if _reference_writes_broken_json(tensors, metadata):
        return
    snp.save_file(tensors, str(ref), metadata=metadata)
    _assert_same_tensors(rnp.load_file(str(ref)), tensors)
    with ringsafe.safe_open(str(ref), "np") as f:
        assert f.metadata() == metadata
        _assert_same_tensors({n: f.get_tensor(n) for n in f.keys()}, tensors)
    _assert_same_tensors(rnp.load(snp.save(tensors, metadata=metadata)), tensors)


@SETTINGS
@given(tensors=torch_checkpoints(max_size=4))
def test_torch_and_numpy_writers_agree(tmp_path, tensors):
    """The same data saved from torch and from NumPy gives the same bytes, for dtypes both have."""
    common = {n: t for n, t in tensors.items() if t.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16,
                                                               torch.uint16, torch.int32, torch.uint32,
                                                               torch.int64, torch.uint64, torch.float16,
                                                               torch.float32, torch.float64, torch.complex64)}
    arrays = {n: t.numpy() for n, t in common.items()}
    assert rpt.save(common) == rnp.save(arrays) == spt.save(common)


def test_strategies_cover_every_dtype():
    """The random checkpoints can hold every dtype torch and the reference save."""
    assert {"F4", "F8_E8M0", "F8_E4M3", "F8_E5M2", "BF16", "C64", "U64", "BOOL"} <= set(TORCH_DTYPES.values())
    for dtype, name in TORCH_DTYPES.items():
        t = _torch_tensor(dtype, [2, 2], 1)
        data = spt.save({"x": t})
        assert f'"dtype":"{name}"'.encode() in data
        assert rpt.save({"x": t}) == data


def test_float4_scalar_is_refused_with_a_clear_error(tmp_path):
    """A 0-d float4_e2m1fn_x2 tensor (two values in one byte) has no safetensors shape;
    the reference raises SafetensorError on save, ringsafe an error naming it, and
    save_file leaves no file."""
    t = torch.zeros((), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(safetensors.SafetensorError):
        spt.save({"x": t})
    with pytest.raises((ringsafe.SafetensorError, ValueError), match="[`']x[`']"):
        rpt.save({"x": t})
    path = tmp_path / "f4.safetensors"
    with pytest.raises((ringsafe.SafetensorError, ValueError), match="[`']x[`']"):
        rpt.save_file({"x": t, "y": torch.zeros(2)}, str(path))
    assert not path.exists()


def test_empty_metadata_without_tensors(tmp_path):
    """Deliberate difference: for no tensors and metadata {}, the reference writes the
    broken header '{},"__metadata__":{}}' (neither library reads it back); ringsafe
    writes '{"__metadata__":{}}', which both read as metadata {} and no tensors."""
    broken = spt.save({}, metadata={})
    with pytest.raises(safetensors.SafetensorError):
        spt.load(broken)
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load(broken)
    assert e.value.kind == "InvalidHeaderDeserialization"
    for data in (rpt.save({}, metadata={}), rnp.save({}, metadata={})):
        assert data[8:].rstrip(b" ") == b'{"__metadata__":{}}'
        assert spt.load(data) == {} and rpt.load(data) == {} and rnp.load(data) == {}
        path = tmp_path / "empty.safetensors"
        path.write_bytes(data)
        for lib in (ringsafe, safetensors):
            with lib.safe_open(str(path), "pt") as f:
                assert f.metadata() == {} and f.keys() == []
    rpt.save_file({}, str(tmp_path / "ours.safetensors"), metadata={})
    assert (tmp_path / "ours.safetensors").read_bytes() == rpt.save({}, metadata={})


def test_views_into_a_larger_storage_are_written_from_their_own_offset(tmp_path):
    base = torch.arange(40, dtype=torch.float32).reshape(10, 4)
    tensors = {"v": base[3:7], "w": torch.arange(6, dtype=torch.int16)[2:]}
    assert rpt.save(tensors) == spt.save(tensors)
    loaded = rpt.load(rpt.save(tensors))
    assert torch.equal(loaded["v"], base[3:7]) and torch.equal(loaded["w"], tensors["w"])
    arrays = {"v": np.arange(40, dtype=np.float32).reshape(10, 4)[3:7]}
    assert rnp.save(arrays) == snp.save(arrays)


@pytest.mark.parametrize("make", [lambda a: a[:, 1:3], lambda a: np.asfortranarray(a), lambda a: a[::-2]],
                         ids=["column_slice", "fortran", "reversed_strided"])
def test_numpy_arrays_that_are_not_c_contiguous_are_written_by_value(tmp_path, make):
    """Deliberate difference: safetensors.numpy writes such an array's memory as
    it lies (other values than the array's); ringsafe writes the array's values
    in C order, exactly as for np.ascontiguousarray of it."""
    a = make(np.arange(40, dtype=np.float32).reshape(10, 4))
    assert not a.flags.c_contiguous
    data = rnp.save({"a": a})
    assert data == snp.save({"a": np.ascontiguousarray(a)})
    assert (rnp.load(data)["a"] == a).all()
    path = tmp_path / "a.safetensors"
    rnp.save_file({"a": a}, str(path))
    assert path.read_bytes() == data

"""How safetensors dtypes map to torch 2.13 and NumPy types, exactly as the
reference (safetensors 0.8.0) maps them, reading and writing.

Reading: for every safetensors dtype and a range of shapes, a hand-made file
is read by both libraries; either both give the same dtype, shape and bytes,
or both refuse (ringsafe with SafetensorError naming the tensor). The mapping
is also spelled out as a table, so a change on either side shows. F4 is
torch.float4_e2m1fn_x2 with the last dimension halved (two values a byte); an
odd last dimension is refused. F6_* have no type in either framework; NumPy
has no bfloat16, float8 or float4.

Writing: every torch and NumPy dtype the reference can save gets the same
header dtype from ringsafe; the ones it cannot save are refused by both.
"""

import json
import math
import struct

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

BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

TORCH = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "U16": torch.uint16,
    "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32, "U32": torch.uint32,
    "F32": torch.float32, "C64": torch.complex64, "F64": torch.float64, "I64": torch.int64,
    "U64": torch.uint64, "F8_E5M2": torch.float8_e5m2, "F8_E4M3": torch.float8_e4m3fn,
    "F8_E8M0": torch.float8_e8m0fnu, "F8_E4M3FNUZ": torch.float8_e4m3fnuz,
    "F8_E5M2FNUZ": torch.float8_e5m2fnuz, "F4": torch.float4_e2m1fn_x2,
    "F6_E2M3": None, "F6_E3M2": None,
}

NUMPY = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16, "F16": np.float16,
    "I32": np.int32, "U32": np.uint32, "F32": np.float32, "C64": np.complex64, "F64": np.float64,
    "I64": np.int64, "U64": np.uint64,
}  # everything else: no NumPy type

SHAPES = [[4], [2, 6], [], [0], [3, 0], [0, 3], [2, 3], [5], [1, 1, 2]]


def _checkpoint(path, entries):
    """Writes a file by hand: entries are (name, dtype, shape); data is a byte pattern."""
    header, data = {}, bytearray()
    for name, dtype, shape in entries:
        nbytes = math.prod(shape) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37 + 11) % 251 for i in range(nbytes))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
    return str(path)


def _outcome(lib, path, framework, name):
    """("open-refused", exc) | ("tensor-refused", exc) | ("ok", tensor)."""
    try:
        f = lib.safe_open(path, framework)
    except Exception as e:  # noqa: BLE001
        return "open-refused", e
    with f:
        try:
            return "ok", f.get_tensor(name)
        except Exception as e:  # noqa: BLE001
            return "tensor-refused", e


def _byte_aligned(dtype, shape):
    return math.prod(shape) * BITS[dtype] % 8 == 0


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
@pytest.mark.parametrize("dtype", sorted(BITS))
def test_read_mapping_matches_the_reference(tmp_path, dtype, shape, framework):
    path = _checkpoint(tmp_path / "t.safetensors", [("t", dtype, shape)])
    ref_kind, ref = _outcome(safetensors, path, framework, "t")
    kind, ours = _outcome(ringsafe, path, framework, "t")
    assert kind == ref_kind, (ours, ref)
    if kind == "open-refused":
        assert not _byte_aligned(dtype, shape)
        assert isinstance(ours, ringsafe.SafetensorError) and ours.kind == "MisalignedSlice"
        return
    assert _byte_aligned(dtype, shape)
    if kind == "tensor-refused":
        assert isinstance(ours, ringsafe.SafetensorError), repr(ours)
        assert "'t'" in str(ours)
        return
    assert type(ours) is type(ref)
    assert ours.dtype == ref.dtype
    assert tuple(ours.shape) == tuple(ref.shape)
    assert raw_bytes(ours) == raw_bytes(ref)
    with ringsafe.safe_open(path, framework) as f:
        assert f.get_slice("t").get_dtype() == dtype
        assert f.get_slice("t").get_shape() == shape


@pytest.mark.parametrize("dtype", sorted(BITS))
def test_torch_mapping_table(tmp_path, dtype):
    shape = [3, 4]
    path = _checkpoint(tmp_path / "t.safetensors", [("t", dtype, shape)])
    with ringsafe.safe_open(path, "pt") as f:
        if TORCH[dtype] is None:
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_tensor("t")
            return
        t = f.get_tensor("t")
    assert t.dtype == TORCH[dtype]
    assert list(t.shape) == ([3, 2] if dtype == "F4" else shape)
    assert len(raw_bytes(t)) == 12 * BITS[dtype] // 8


@pytest.mark.parametrize("dtype", sorted(BITS))
def test_numpy_mapping_table(tmp_path, dtype):
    path = _checkpoint(tmp_path / "t.safetensors", [("t", dtype, [3, 4])])
    with ringsafe.safe_open(path, "np") as f:
        if dtype not in NUMPY:
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_tensor("t")
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_tensors()
            return
        a = f.get_tensor("t")
    assert a.dtype == np.dtype(NUMPY[dtype])
    assert a.dtype.byteorder in "=|<"
    assert a.shape == (3, 4)


@pytest.mark.parametrize("shape,torch_shape", [([2, 6], [2, 3]), ([8], [4]), ([3, 0], [3, 0]), ([0, 4], [0, 2]),
                                               ([1, 1, 2], [1, 1, 1])])
def test_f4_is_float4_x2_with_the_last_dimension_halved(tmp_path, shape, torch_shape):
    path = _checkpoint(tmp_path / "t.safetensors", [("t", "F4", shape)])
    with ringsafe.safe_open(path, "pt") as f, safetensors.safe_open(path, "pt") as ref:
        t = f.get_tensor("t")
        assert t.dtype == torch.float4_e2m1fn_x2
        assert list(t.shape) == torch_shape == list(ref.get_tensor("t").shape)
        assert f.get_slice("t").get_shape() == shape  # the file's shape, in 4-bit elements
    assert list(rpt.load_file(path)["t"].shape) == torch_shape
    # Written back, the header says F4 with the file's shape again.
    assert rpt.save({"t": t}) == spt.save({"t": t})
    assert f'"shape":{json.dumps(shape, separators=(",", ":"))}'.encode() in rpt.save({"t": t})


@pytest.mark.parametrize("shape", [[7], [2, 3], [0, 3], [4, 1]])
def test_f4_with_an_odd_last_dimension_is_refused(tmp_path, shape):
    path = _checkpoint(tmp_path / "t.safetensors", [("t", "F4", shape), ("u", "U8", [2])])
    ref_kind, _ = _outcome(safetensors, path, "pt", "t")
    if _byte_aligned("F4", shape):
        assert ref_kind == "tensor-refused"
        with ringsafe.safe_open(path, "pt") as f:
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_tensor("t")
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_slice("t")[...]
            assert f.get_tensor("u").tolist() == [11, 48]  # the other tensor still reads
        with pytest.raises(ringsafe.SafetensorError, match="'t'"):
            rpt.load_file(path)
        with pytest.raises(ringsafe.SafetensorError, match="'t'"):
            rpt.load(open(path, "rb").read())
    else:  # an odd number of 4-bit values: the file itself is refused
        assert ref_kind == "open-refused"
        with pytest.raises(ringsafe.SafetensorError) as e:
            ringsafe.safe_open(path, "pt")
        assert e.value.kind == "MisalignedSlice"


def _f4_file(tmp_path):
    t = torch.arange(12, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).reshape(3, 4)  # file shape [3, 8]
    path = str(tmp_path / "f4.safetensors")
    spt.save_file({"t": t}, path)
    return path


@pytest.mark.parametrize("index,rows", [
    ((slice(None),), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]),
    ((1,), [4, 5, 6, 7]),
    ((slice(None), slice(2, 6)), [[1, 2], [5, 6], [9, 10]]),
    ((slice(0, 2), slice(0, 2)), [[0], [4]]),
    ((None, 2, slice(4, 8)), [[10, 11]]),
    ((Ellipsis, slice(-2, None)), [[3], [7], [11]]),
])
def test_f4_slices_index_the_file_shape(tmp_path, index, rows):
    """get_slice on F4 indexes 4-bit elements (the file's shape, [3, 8] here) and
    returns float4_e2m1fn_x2 (two a byte). The reference's get_slice cannot read
    F4 at all (RuntimeError from a reshape to the file's shape)."""
    path = _f4_file(tmp_path)
    with ringsafe.safe_open(path, "pt") as f:
        s = f.get_slice("t")
        assert s.get_shape() == [3, 8] and s.get_dtype() == "F4"
        r = s[index]
        assert r.dtype == torch.float4_e2m1fn_x2
        assert r.view(torch.uint8).tolist() == rows


@pytest.mark.parametrize("index", [(Ellipsis, 1), (slice(None), slice(1, 3)), (slice(None), slice(None, None, 2)),
                                   (slice(None), slice(6, 2, -1))])
def test_f4_slices_inside_a_byte_are_refused(tmp_path, index):
    path = _f4_file(tmp_path)
    with ringsafe.safe_open(path, "pt") as f:
        with pytest.raises(ringsafe.SafetensorError, match="'t'"):
            f.get_slice("t")[index]


@pytest.mark.parametrize("index,rows", [(([2, 0],), [[8, 9, 10, 11], [0, 1, 2, 3]]),
                                        ((slice(None, None, -1), slice(6, None)), [[11], [7], [3]]),
                                        ((slice(None), slice(None, None, -1)), None),
                                        ((slice(None), [0, 1]), None)])
def test_f4_list_and_reversed_slices(tmp_path, index, rows):
    """Whole rows picked by a list or a reversed leading slice are whole bytes and
    could be returned; reversing or picking 4-bit elements inside bytes should be a SafetensorError, as other
    slices inside a byte are."""
    path = _f4_file(tmp_path)
    with ringsafe.safe_open(path, "pt") as f:
        if rows is None:
            with pytest.raises(ringsafe.SafetensorError, match="'t'"):
                f.get_slice("t")[index]
        else:
            assert f.get_slice("t")[index].view(torch.uint8).tolist() == rows


ALL_DTYPES_TORCH = {
    "t_bf16": (torch.bfloat16, (2, 4)), "t_bool": (torch.bool, (2, 4)), "t_c64": (torch.complex64, (2, 4)),
    "t_f16": (torch.float16, (2, 4)), "t_f32": (torch.float32, (2, 4)),
    "t_f4": (torch.float4_e2m1fn_x2, (2, 2)), "t_f64": (torch.float64, (2, 4)),
    "t_f6_e2m3": None, "t_f6_e3m2": None,
    "t_f8_e4m3": (torch.float8_e4m3fn, (2, 4)), "t_f8_e5m2": (torch.float8_e5m2, (2, 4)),
    "t_f8_e8m0": (torch.float8_e8m0fnu, (2, 4)), "t_i16": (torch.int16, (2, 4)), "t_i32": (torch.int32, (2, 4)),
    "t_i64": (torch.int64, (2, 4)), "t_i8": (torch.int8, (2, 4)), "t_u16": (torch.uint16, (2, 4)),
    "t_u32": (torch.uint32, (2, 4)), "t_u64": (torch.uint64, (2, 4)), "t_u8": (torch.uint8, (2, 4)),
}
ALL_DTYPES_NUMPY = {
    name: (None if v is None or name in ("t_bf16", "t_f4", "t_f8_e4m3", "t_f8_e5m2", "t_f8_e8m0")
           else (np.dtype(str(v[0]).split(".")[1]), v[1]))
    for name, v in ALL_DTYPES_TORCH.items()
}
ALL_DTYPES_HEADER = {
    "t_bf16": "BF16", "t_bool": "BOOL", "t_c64": "C64", "t_f16": "F16", "t_f32": "F32", "t_f4": "F4",
    "t_f64": "F64", "t_f6_e2m3": "F6_E2M3", "t_f6_e3m2": "F6_E3M2", "t_f8_e4m3": "F8_E4M3",
    "t_f8_e5m2": "F8_E5M2", "t_f8_e8m0": "F8_E8M0", "t_i16": "I16", "t_i32": "I32", "t_i64": "I64",
    "t_i8": "I8", "t_u16": "U16", "t_u32": "U32", "t_u64": "U64", "t_u8": "U8",
}


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_every_tensor_of_all_dtypes(conformance_dir, framework):
    path = str(conformance_dir / "valid" / "all_dtypes.safetensors")
    table = ALL_DTYPES_TORCH if framework == "pt" else ALL_DTYPES_NUMPY
    with ringsafe.safe_open(path, framework) as f, safetensors.safe_open(path, framework) as ref:
        assert f.keys() == sorted(table)
        for name, want in table.items():
            s = f.get_slice(name)
            assert s.get_dtype() == ALL_DTYPES_HEADER[name]
            assert s.get_shape() == [2, 4]
            assert ref.get_slice(name).get_dtype() == s.get_dtype()
            if want is None:
                with pytest.raises(ringsafe.SafetensorError, match=f"'{name}'"):
                    f.get_tensor(name)
                with pytest.raises(Exception):
                    ref.get_tensor(name)
                continue
            t = f.get_tensor(name)
            assert (t.dtype, tuple(t.shape)) == want, name
            r = ref.get_tensor(name)
            assert (r.dtype, tuple(r.shape)) == want, name
            assert raw_bytes(t) == raw_bytes(r)


@pytest.mark.parametrize("dtype", [d for d in TORCH.values() if d is not None], ids=str)
def test_torch_write_mapping_matches_the_reference(dtype):
    t = torch.from_numpy(np.arange(8, dtype=np.uint8) % 2).view(dtype) if dtype.itemsize == 1 else \
        torch.from_numpy(np.arange(8 * dtype.itemsize, dtype=np.uint8)).view(dtype)
    t = t.reshape(2, -1)
    name = next(k for k, v in TORCH.items() if v == dtype)
    data = rpt.save({"t": t})
    assert data == spt.save({"t": t})
    assert f'"dtype":"{name}"'.encode() in data


@pytest.mark.filterwarnings("ignore::UserWarning")  # complex32 and quint8 warn on creation
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex32, torch.bits8, torch.uint1, torch.int4,
                                   torch.quint8], ids=str)
def test_torch_dtypes_without_a_safetensors_dtype_are_refused(dtype):
    try:
        t = torch.empty(4, dtype=dtype)
    except (RuntimeError, TypeError):
        pytest.skip(f"torch cannot allocate {dtype} here")
    with pytest.raises(KeyError):
        spt.save({"t": t})
    with pytest.raises((ValueError, TypeError, ringsafe.SafetensorError), match="[`']t[`']"):
        rpt.save({"t": t})


@pytest.mark.parametrize("dtype", list(NUMPY.values()) + [np.dtype(">i4"), np.dtype(">f8"), np.dtype(">c8"),
                                                          np.intc, np.longlong, np.dtype("=u2")], ids=str)
def test_numpy_write_mapping_matches_the_reference(dtype):
    a = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
    data = rnp.save({"t": a})
    assert data == snp.save({"t": a})
    got = rnp.load(data)["t"]
    assert got.dtype == np.dtype(dtype).newbyteorder("<") and got.shape == (2, 3)
    assert (got == a).all()


@pytest.mark.parametrize("dtype", [np.complex128, np.longdouble, np.dtype("U3"), object, np.dtype("M8[s]"),
                                   np.dtype([("a", "<i4")]), np.clongdouble],
                         ids=str)
def test_numpy_dtypes_without_a_safetensors_dtype_are_refused(dtype):
    a = np.zeros(2, dtype=dtype)
    with pytest.raises(safetensors.SafetensorError):
        snp.save({"t": a})
    with pytest.raises((ValueError, TypeError, ringsafe.SafetensorError)):
        rnp.save({"t": a})

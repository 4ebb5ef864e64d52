"""The tensor records the binding hands out (ringsafe._ringsafe.TensorInfo):
the same record from Reader.tensors(), parse_bytes() and parse_header(), with
named read-only fields, nbytes = end - begin, the shard of a sharded index, a
repr that names every field, equality by value and a pickle round trip (the
distributed loads compare and exchange headers). The binding's other results
are records too, read by name: ParsedHeader (parse_bytes, parse_header),
PopulateStats (MappedFile.populate, copy_to), FetchedFile (fetch_file)."""

import json
import pickle

import pytest
import safetensors.torch as spt
import torch
from ringsafe import _ringsafe


@pytest.fixture
def blob():
    return spt.save({"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "s": torch.tensor(7, dtype=torch.int64),
                     "z": torch.empty(0, 4, dtype=torch.float16)})


def test_fields_of_each_record(blob):
    parsed = _ringsafe.parse_bytes(blob)
    infos, start = parsed.tensors, parsed.data_start
    by_name = {t.name: t for t in infos}
    a, s, z = by_name["a"], by_name["s"], by_name["z"]
    assert (a.dtype, a.shape, a.nbytes, a.shard) == ("F32", (2, 3), 24, 0)
    assert a.end - a.begin == a.nbytes
    assert (s.dtype, s.shape, s.nbytes) == ("I64", (), 8)
    assert (z.dtype, z.shape, z.nbytes, z.begin) == ("F16", (0, 4), 0, z.end)
    assert isinstance(a.shape, tuple) and all(type(d) is int for d in a.shape)
    header = json.loads(blob[8:start])
    for t in infos:
        assert [t.begin, t.end] == header[t.name]["data_offsets"]
        assert list(t.shape) == header[t.name]["shape"]


def test_records_are_read_only_and_not_tuples(blob):
    t = _ringsafe.parse_bytes(blob).tensors[0]
    for field in ("name", "dtype", "shape", "begin", "end", "nbytes", "shard"):
        with pytest.raises(AttributeError):
            setattr(t, field, getattr(t, field))
    with pytest.raises(TypeError):
        t[0]  # read by name, never by position


def test_repr_names_every_field(blob):
    a = {t.name: t for t in _ringsafe.parse_bytes(blob).tensors}["a"]
    assert repr(a) == f"TensorInfo(name='a', dtype='F32', shape=(2, 3), begin={a.begin}, end={a.end}, shard=0)"


def test_equality_hash_and_pickle(blob, tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(blob)
    parsed = _ringsafe.parse_bytes(blob).tensors
    r = _ringsafe.Reader(str(path))
    try:
        listed = r.tensors()
    finally:
        r.close()
    assert listed == parsed and len({hash(t) for t in listed} & {hash(t) for t in parsed}) == len(listed)
    assert listed[0] != listed[1] and listed[0] != tuple()
    assert pickle.loads(pickle.dumps(listed)) == listed


def test_a_sharded_index_names_each_tensors_shard(tmp_path):
    spt.save_file({"x": torch.ones(4)}, str(tmp_path / "m-1.safetensors"))
    spt.save_file({"y": torch.zeros(2, 2)}, str(tmp_path / "m-2.safetensors"))
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"x": "m-1.safetensors", "y": "m-2.safetensors"}}))
    r = _ringsafe.Reader(str(index))
    try:
        shards = {t.name: t.shard for t in r.tensors()}
    finally:
        r.close()
    assert shards == {"x": 0, "y": 1}


def test_a_record_made_by_hand_is_checked():
    t = _ringsafe.TensorInfo(name="w", dtype="BF16", shape=[3, 4], begin=64, end=88)
    assert (t.shape, t.nbytes, t.shard) == ((3, 4), 24, 0)
    with pytest.raises(_ringsafe.SafetensorError, match="end 8 is before begin 16"):
        _ringsafe.TensorInfo(name="w", dtype="F32", shape=[2], begin=16, end=8)
    with pytest.raises(TypeError):
        _ringsafe.TensorInfo("w", "F32", [2], 0, 8)  # keyword-only


def test_both_adapters_have_every_method_of_the_adapter_interface():
    import inspect

    import numpy as np
    from ringsafe._frameworks import Adapter, adapter_for

    wanted = {n for n, v in vars(Adapter).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert {"views", "fresh", "empty", "dtype_of", "describe", "index"} <= wanted
    for framework in ("pt", "np"):
        adapter = adapter_for(framework)
        missing = {n for n in wanted if not callable(getattr(adapter, n, None))}
        assert not missing, (framework, missing)
        assert isinstance(adapter.framework, str) and isinstance(adapter.tensor_type, str)
    np_adapter = adapter_for("np")
    a = np_adapter.empty("F32", [2, 3], "cpu", "x")
    assert a.shape == (2, 3) and a.dtype == np.float32
    assert np_adapter.dtype_of(np.zeros(1, dtype=">i4")) == "I32" and np_adapter.dtype_of(np.zeros(1, "U1")) is None


def test_fresh_gives_a_read_only_record_whose_address_is_the_tensor_s():
    from ringsafe._described import FreshTensor
    from ringsafe._frameworks import adapter_for
    from ringsafe._memory import ARENA_MIN_BYTES

    for framework in ("pt", "np"):
        adapter = adapter_for(framework)
        for n in (4, ARENA_MIN_BYTES // 4):  # plain memory, and a view of an arena
            fresh = adapter.fresh("F32", [n], 4 * n, "w")
            assert isinstance(fresh, FreshTensor) and tuple(fresh.tensor.shape) == (n,)
            address = fresh.tensor.data_ptr() if framework == "pt" else fresh.tensor.ctypes.data
            assert fresh.address == address, (framework, n)
            _read_only_record(fresh, ("tensor", "address"))


def _read_only_record(record, fields):
    for field in fields:
        with pytest.raises(AttributeError):
            setattr(record, field, getattr(record, field))
    with pytest.raises(TypeError):
        record[0]  # read by name, never by position
    with pytest.raises(TypeError):
        iter(record)


def test_the_binding_s_other_results_are_read_only_records(blob, tmp_path):
    parsed = _ringsafe.parse_bytes(blob)
    assert sorted(t.name for t in parsed.tensors) == ["a", "s", "z"] and parsed.metadata is None
    n = int.from_bytes(blob[:8], "little")
    assert parsed.data_start == 8 + n
    assert _ringsafe.parse_header(blob[8:8 + n], len(blob)).tensors == parsed.tensors
    _read_only_record(parsed, ("tensors", "metadata", "data_start"))
    assert repr(parsed) == f"ParsedHeader(3 tensors, data_start={8 + n})"

    path = tmp_path / "m.safetensors"
    path.write_bytes(blob)
    m = _ringsafe.MappedFile(str(path))
    got = m.populate([(0, len(blob))], 1)
    assert (got.bytes, got.threads) == (len(blob), 1) and 0 <= got.cold_bytes <= len(blob)
    _read_only_record(got, ("bytes", "cold_bytes", "threads"))
    assert m.copy_to([(0, 8, bytearray(8))], 1).bytes == 8

    fetched = _ringsafe.fetch_file(str(path))
    assert (fetched.data, fetched.name) == (blob, str(path))
    _read_only_record(fetched, ("data", "name"))

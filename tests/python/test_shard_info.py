"""The shard records the binding hands out (ringsafe._ringsafe.ShardInfo, from
Reader.shards()): named read-only fields that match the file's layout (spec, the
file's size, data_start = 8 + the header's length, in the index's order) and
the file as the reader opened it (stat, a FileStat: which file, its size and
modification time, as MappedFile.stat gives them), never a tuple read by
position, a repr that names every field, equality by value, a pickle round
trip, and a spec that keeps a path's bytes as os.fsdecode does."""

import json
import os
import pickle
import re
import struct

import pytest
import safetensors.torch as spt
import torch
from ringsafe import _ringsafe


def _shards(spec):
    r = _ringsafe.Reader(spec)
    try:
        return r.shards(), r.tensors()
    finally:
        r.close()


def _layout(path):
    """(size, data_start) of a safetensors file, read from its bytes."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return os.path.getsize(path), 8 + n


def test_fields_match_the_file_layout(tmp_path):
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.arange(6, dtype=torch.float32), "b": torch.ones(3, dtype=torch.int16)}, str(path),
                  metadata={"format": "pt"})
    shards, infos = _shards(str(path))
    assert len(shards) == 1
    s = shards[0]
    assert s.spec == str(path)
    assert (s.size, s.data_start) == _layout(path)
    blob = path.read_bytes()
    a = next(t for t in infos if t.name == "a")
    assert blob[s.data_start + a.begin:s.data_start + a.end] == torch.arange(6, dtype=torch.float32).numpy().tobytes()


def test_a_sharded_index_lists_its_shards_in_order(tmp_path):
    spt.save_file({"x": torch.ones(4)}, str(tmp_path / "m-1.safetensors"))
    spt.save_file({"y": torch.zeros(2, 2), "z": torch.full((5,), 7, dtype=torch.int64)},
                  str(tmp_path / "m-2.safetensors"))
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"x": "m-1.safetensors", "y": "m-2.safetensors",
                                                "z": "m-2.safetensors"}}))
    shards, infos = _shards(str(index))
    assert [os.path.basename(s.spec) for s in shards] == ["m-1.safetensors", "m-2.safetensors"]
    for s in shards:
        assert os.path.samefile(s.spec, tmp_path / os.path.basename(s.spec))
        assert (s.size, s.data_start) == _layout(s.spec)
    z = next(t for t in infos if t.name == "z")
    raw = (tmp_path / "m-2.safetensors").read_bytes()
    start = shards[z.shard].data_start
    assert raw[start + z.begin:start + z.end] == struct.pack("<5q", *[7] * 5)


def test_records_are_read_only_and_not_tuples(tmp_path):
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.ones(2)}, str(path))
    s = _shards(str(path))[0][0]
    for field in ("spec", "size", "data_start", "stat"):
        with pytest.raises(AttributeError):
            setattr(s, field, getattr(s, field))
    with pytest.raises(TypeError):
        s[2]  # read by name, never by position
    with pytest.raises(TypeError):
        spec, size, data_start = s
    for field in ("device", "inode", "size", "mtime_ns"):
        with pytest.raises(AttributeError):
            setattr(s.stat, field, getattr(s.stat, field))
    with pytest.raises(TypeError):
        s.stat[3]
    with pytest.raises(TypeError):
        dev, ino, size, mtime = s.stat


def test_repr_equality_hash_and_pickle(tmp_path):
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.ones(2)}, str(path))
    first, again = _shards(str(path))[0][0], _shards(str(path))[0][0]
    size, data_start = _layout(path)
    st = os.stat(path)
    stat = (f"FileStat(device={st.st_dev}, inode={st.st_ino}, size={size}, mtime_ns={st.st_mtime_ns})")
    assert repr(first.stat) == stat
    assert repr(first) == f"ShardInfo(spec={str(path)!r}, size={size}, data_start={data_start}, stat={stat})"
    assert first == again and hash(first) == hash(again) and first is not again
    assert first != _ringsafe.ShardInfo(spec=first.spec, size=size + 1, data_start=data_start)
    assert first != _ringsafe.ShardInfo(spec=first.spec, size=size, data_start=data_start)  # no identity
    assert first != (first.spec, size, data_start)
    assert first.stat != (st.st_dev, st.st_ino, size, st.st_mtime_ns)
    assert pickle.loads(pickle.dumps(first)) == first
    assert pickle.loads(pickle.dumps(first.stat)) == first.stat and hash(first.stat) == hash(again.stat)


def test_a_pickled_state_of_the_wrong_length_is_refused(tmp_path):
    """Each record's __setstate__ names the state it takes; == against another
    type is NotImplemented (so False), never an error."""
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.ones(2)}, str(path))
    shards, tensors = _shards(str(path))
    for record, layout in ((tensors[0], "(name, dtype, shape, begin, end, shard)"),
                           (shards[0].stat, "(device, inode, size, mtime_ns)"),
                           (shards[0], "(spec, size, data_start, stat)")):
        state = record.__getstate__()
        blank = type(record).__new__(type(record))
        with pytest.raises(ValueError, match=re.escape(f"{type(record).__name__} state is {layout}")):
            blank.__setstate__(state + (0,))
        assert record.__eq__(object()) is NotImplemented and record != object()
        assert pickle.loads(pickle.dumps(record)) == record and hash(pickle.loads(pickle.dumps(record))) == hash(record)


def test_stat_is_the_file_the_reader_opened(tmp_path):
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.ones(2)}, str(path))
    r = _ringsafe.Reader(str(path))
    try:
        s = r.shards()[0]
        st = os.stat(path)
        assert (s.stat.device, s.stat.inode, s.stat.size, s.stat.mtime_ns) == \
               (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        m = _ringsafe.MappedFile(str(path))
        assert m.stat == s.stat and m.stat.same_file(s.stat)
        # Rewritten in place: the same file, another size and time.
        spt.save_file({"a": torch.ones(4)}, str(tmp_path / "other.safetensors"))
        with open(path, "r+b") as f:
            f.write((tmp_path / "other.safetensors").read_bytes())
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        now = _ringsafe.MappedFile(str(path)).stat
        assert now.same_file(s.stat) and now != s.stat and now.size != s.stat.size
        # Another file renamed over the path: not the same file.
        os.replace(tmp_path / "other.safetensors", path)
        assert not _ringsafe.MappedFile(str(path)).stat.same_file(s.stat)
        assert r.shards()[0].stat == s.stat  # the reader's record stays what it opened
    finally:
        r.close()
    assert not hasattr(r, "shard_stat") and not hasattr(r, "shard_identity")  # the tuple getters are gone
    assert not hasattr(m, "identity")


def test_a_record_made_by_hand_is_checked():
    s = _ringsafe.ShardInfo(spec="hf://org/repo@abc/m.safetensors", size=100, data_start=40)
    assert (s.spec, s.size, s.data_start) == ("hf://org/repo@abc/m.safetensors", 100, 40)
    assert s.stat == _ringsafe.FileStat(device=0, inode=0, size=100, mtime_ns=0)  # a URL's: no file named
    stat = _ringsafe.FileStat(device=5, inode=7, size=100, mtime_ns=-3)
    assert _ringsafe.ShardInfo(spec="m.safetensors", size=100, data_start=40, stat=stat).stat == stat
    with pytest.raises(_ringsafe.SafetensorError, match="its stat's size 100 is not its size 101"):
        _ringsafe.ShardInfo(spec="m.safetensors", size=101, data_start=40, stat=stat)
    with pytest.raises(_ringsafe.SafetensorError, match="data_start 120 is not between 8 and its size 100"):
        _ringsafe.ShardInfo(spec="m.safetensors", size=100, data_start=120)
    with pytest.raises(_ringsafe.SafetensorError, match="data_start 4 is not between 8"):
        _ringsafe.ShardInfo(spec="m.safetensors", size=100, data_start=4)
    with pytest.raises(TypeError):
        _ringsafe.ShardInfo("m.safetensors", 100, 40)  # keyword-only


def test_a_path_that_is_not_utf8_keeps_its_bytes(tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"m-\xff.safetensors")
    try:
        with open(path, "wb") as f:
            f.write(spt.save({"a": torch.ones(2)}))
    except (OSError, UnicodeError):
        pytest.skip("the filesystem takes no file name that is not UTF-8")
    s = _shards(path)[0][0]
    assert s.spec == os.fsdecode(path) and os.fsencode(s.spec) == path
    assert pickle.loads(pickle.dumps(s)) == s

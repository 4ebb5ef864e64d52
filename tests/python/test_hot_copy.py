"""Loads into memory the caller holds (load_model into host parameters,
read_into) copy a checkpoint whose selected bytes are in the page cache out of
a mapping of it (MappedFile.copy_to), read a cold one with O_DIRECT, and read
anything in between through the reader; the bytes are the file's either way
(ringsafe._caller_memory.mapped_or_read, whose decisions the tests count)."""

import collections
import json
import os

import numpy as np
import pytest

import ringsafe  # from the build tree without PYTHONPATH (conftest)
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from ringsafe import _caller_memory
from ringsafe._described import FileRange, MemorySpan, RangeCopy
from ringsafe._ringsafe import MappedFile
from ringsafe._torch_adapter import ADAPTER
from torch import nn

from conftest import evict, warm


def resident(path):
    m = MappedFile(str(path))
    return m.resident(0, m.size) / m.size


@pytest.fixture
def loads(monkeypatch):
    """How the loads of the test went: a function returning how many of mapped_or_read's
    decisions (CallerMemoryRead.how) were "mapped", "direct" and "reader"."""
    seen: collections.Counter[str] = collections.Counter()
    decide = _caller_memory.mapped_or_read

    def counted(*args, **kwargs):
        how = decide(*args, **kwargs)
        seen[how.how] += 1
        return how
    monkeypatch.setattr(_caller_memory, "mapped_or_read", counted)
    return lambda: dict(seen)


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    """A model and its 16 MiB checkpoint, cached (DIRECT_MIN_BYTES lowered to 1 MiB, as in test_cold_direct,
    and COPY_MIN_BYTES to match)."""
    monkeypatch.setattr(_caller_memory, "DIRECT_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(_caller_memory, "COPY_MIN_BYTES", 1 << 20)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.Linear(2048, 1024))
    path = tmp_path / "m.safetensors"
    spt.save_model(model, str(path))
    want = {k: v.clone() for k, v in model.state_dict().items()}
    for p in model.parameters():
        p.data.zero_()
    warm(path)
    return model, str(path), want


def cold(path):
    """Evicts ``path``; skips where it stays in memory (tmpfs) or O_DIRECT is refused."""
    evict(path)
    if resident(path) >= 0.1:
        pytest.skip("this filesystem keeps the file in memory: it cannot be made cold")
    try:
        ringsafe.Reader(str(path), direct=True).close()
    except (OSError, ringsafe.SafetensorError) as e:
        pytest.skip(f"no O_DIRECT here: {e}")


def same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k


# ------------------------------------------------------------ MappedFile.copy_to

@pytest.fixture
def pattern_file(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, (13 << 20) + 517, dtype=np.uint8)
    path = tmp_path / "pattern.bin"
    data.tofile(path)
    return path, data


def test_copy_to_copies_exact_bytes_into_buffers(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    # Unaligned ranges, one across several 4 MiB pieces; buffers of several kinds.
    spans = [(5, 3000), ((4 << 20) - 11, (6 << 20) + 5), (len(data) - 517, 517), (100, 0)]
    outs = [np.full(n + 64, 7, np.uint8) for _, n in spans]
    t = torch.zeros(1000, dtype=torch.int32)  # a torch tensor's bytes, as the loads pass them
    got = m.copy_to([(o, n, out) for (o, n), out in zip(spans, outs)] + [(9, 4000, ADAPTER.byte_view(t))])
    assert got.bytes == sum(n for _, n in spans) + 4000 and got.cold_bytes == 0
    for (o, n), out in zip(spans, outs):
        assert np.array_equal(out[:n], data[o:o + n])
        assert (out[n:] == 7).all()  # nothing past the length
    assert bytes(t.view(torch.uint8).numpy()) == data[9:4009].tobytes()


def test_copy_to_reports_progress_and_uses_the_threads_asked_for(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    out = np.empty(len(data), np.uint8)
    seen = []
    got = m.copy_to([(0, len(data), out)], 3, lambda d, t: seen.append((d, t)))
    assert (got.bytes, got.threads) == (len(data), 3)
    assert seen[-1] == (len(data), len(data))
    assert np.array_equal(out, data)


def test_copy_to_checks_every_buffer_before_any_byte_moves(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    ok = np.zeros(100, np.uint8)
    with pytest.raises(ringsafe.SafetensorError, match="into a buffer of 50") as e:
        m.copy_to([(0, 100, ok), (0, 100, np.zeros(50, np.uint8))])
    assert e.value.kind == "BufferTooSmall"
    assert not ok.any()
    with pytest.raises(ringsafe.SafetensorError, match="past the end") as e:
        m.copy_to([(0, 100, ok), (len(data) - 10, 11, np.zeros(11, np.uint8))])
    assert e.value.kind == "InvalidArgument"
    assert not ok.any()
    with pytest.raises(ringsafe.SafetensorError, match="offset must not be negative"):
        m.copy_to([(-1, 10, ok)])
    with pytest.raises(ringsafe.SafetensorError, match=r"\(offset, length, buffer\) tuples; got a tuple of 2") as e:
        m.copy_to([(0, 10)])
    assert e.value.kind == "InvalidArgument"
    with pytest.raises(TypeError, match="read-only"):
        m.copy_to([(0, 10, b"\0" * 10)])
    with pytest.raises(TypeError, match="C-contiguous"):
        m.copy_to([(0, 10, np.zeros((10, 4), np.uint8)[:, 0])])  # a strided view
    with pytest.raises(ringsafe.SafetensorError, match="overlaps the mapping"):
        m.copy_to([(0, 10, memoryview(m)[100:200])])
    assert not ok.any()


def test_copy_to_reports_a_file_that_shrank(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    os.truncate(path, 4096)
    with pytest.raises(ringsafe.SafetensorError, match="shorter") as e:
        m.copy_to([(0, len(data), np.empty(len(data), np.uint8))])
    assert e.value.kind == "Truncated"


def test_copy_to_takes_range_copy_records_and_still_tuples(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    a, b, c = np.zeros(3000, np.uint8), np.zeros(517, np.uint8), np.zeros(9, np.uint8)
    # Records read by name; the (offset, length, buffer) tuples of before are also accepted, in one call.
    got = m.copy_to([RangeCopy(5, 3000, a), RangeCopy(offset=len(data) - 517, length=517, buffer=b), (100, 9, c)])
    assert got.bytes == 3000 + 517 + 9
    assert np.array_equal(a, data[5:3005]) and np.array_equal(b, data[-517:]) and np.array_equal(c, data[100:109])


def test_copy_to_refuses_an_element_of_another_shape_before_any_byte_moves(pattern_file):
    path, data = pattern_file
    m = MappedFile(str(path))
    ok = np.zeros(100, np.uint8)
    expected = r"MappedFile.copy_to takes RangeCopy records or \(offset, length, buffer\) tuples"
    with pytest.raises(TypeError, match=expected + r", not FileRange \(it has no 'buffer'\)"):
        m.copy_to([RangeCopy(0, 100, ok), FileRange(0, 100)])
    with pytest.raises(TypeError, match=expected + ", not int$"):
        m.copy_to([RangeCopy(0, 100, ok), 7])
    with pytest.raises(TypeError, match="offset must be an int, not str"):
        m.copy_to([RangeCopy("0", 100, ok)])
    with pytest.raises(TypeError, match="bytes-like object"):
        m.copy_to([RangeCopy(0, 100, MemorySpan(ok.ctypes.data, 100))])  # an address is not a buffer
    with pytest.raises(ringsafe.SafetensorError, match="length must not be negative"):
        m.copy_to([RangeCopy(0, -1, ok)])
    assert not ok.any()


class _RecordingMapping(MappedFile):
    """A MappedFile noting the elements populate() and copy_to() are given."""

    seen: list = []

    def populate(self, ranges, *args):
        self.seen.extend(ranges)
        return super().populate(ranges, *args)

    def copy_to(self, copies, *args):
        self.seen.extend(copies)
        return super().copy_to(copies, *args)


def test_the_loads_hand_the_mapping_records(ckpt, loads, monkeypatch):
    # No positional tuple crosses into the extension: the header check and the copies pass FileRange and
    # RangeCopy records.
    model, path, want = ckpt
    monkeypatch.setattr(_RecordingMapping, "seen", [])
    monkeypatch.setattr(_caller_memory, "MappedFile", _RecordingMapping)
    dst = {k: torch.empty_like(v) for k, v in want.items()}
    rpt.read_into(path, dst)
    same(dst, want)
    assert loads() == {"mapped": 1}
    kinds = collections.Counter(type(e).__name__ for e in _RecordingMapping.seen)
    assert kinds == {"FileRange": 1, "RangeCopy": len(want)}


# ------------------------------------------------------------ which path a load takes

def test_a_cached_checkpoint_is_copied_from_its_mapping(ckpt, loads):
    model, path, want = ckpt
    seen = []
    assert rpt.load_model(model, path, progress=lambda d, t: seen.append((d, t))) == (set(), [])
    same(model.state_dict(), want)
    total = sum(v.numel() * v.element_size() for v in want.values())
    assert seen and seen[-1] == (total, total)
    dst = {k: torch.empty_like(v) for k, v in want.items()}
    rpt.read_into(path, dst, threads=3)
    same(dst, want)
    assert loads() == {"mapped": 2}


def test_a_cold_checkpoint_is_read_with_o_direct_and_a_partly_cached_one_through_the_reader(ckpt, loads):
    model, path, want = ckpt
    cold(path)
    rpt.load_model(model, path)
    same(model.state_dict(), want)
    assert loads() == {"direct": 1}
    cold(path)
    # Half of the bytes cached: neither cold (O_DIRECT) nor hot (the mapping).
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(size // 2)
        f.read()
    assert 0.3 < resident(path) < 0.8
    dst = {k: torch.empty_like(v) for k, v in want.items()}
    rpt.read_into(path, dst)
    same(dst, want)
    assert loads() == {"direct": 1, "reader": 1}


def test_a_small_selection_is_read(ckpt, loads):
    _, path, want = ckpt
    small = min(want, key=lambda k: want[k].numel())
    dst = {small: torch.empty_like(want[small])}
    rpt.read_into(path, dst)  # cached, but under COPY_MIN_BYTES: an inline read costs less than mapping
    same(dst, {small: want[small]})
    assert loads() == {"reader": 1}


def test_direct_and_the_pread_backend_never_map(ckpt, loads):
    model, path, want = ckpt
    rpt.load_model(model, path, backend="pread")
    same(model.state_dict(), want)
    dst = {k: torch.empty_like(v) for k, v in want.items()}
    try:
        rpt.read_into(path, dst, direct=True)
    except OSError as e:  # no O_DIRECT on this filesystem
        pytest.skip(f"no O_DIRECT here: {e}")
    same(dst, want)
    assert loads() == {"reader": 2}
    # A Reader of the caller's is read as it is: no choice made.
    r = ringsafe.Reader(path)
    try:
        rpt.read_into(r, dst)
    finally:
        r.close()
    same(dst, want)
    assert loads() == {"reader": 2}


def test_conversions_and_shards_are_copied_from_the_mappings(ckpt, loads, tmp_path):
    model, path, want = ckpt
    half = model.half()  # every parameter converted from the file's F32: views of the mapping, then copy_
    rpt.load_model(half, path)
    same(half.state_dict(), {k: v.half() for k, v in want.items()})
    names = sorted(want)
    shards = {}
    for i, part in enumerate((names[:2], names[2:])):
        f = f"model-0000{i + 1}-of-00002.safetensors"
        spt.save_file({k: want[k] for k in part}, str(tmp_path / f))
        shards.update({k: f for k in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": shards}))
    model.float()
    rpt.load_model(model, str(index))
    same(model.state_dict(), want)
    assert loads() == {"mapped": 2}


def test_the_mapped_copy_checks_destinations_as_the_reads_do(ckpt, loads):
    _, path, want = ckpt
    k1, k2 = sorted(want)[:2]
    shared = torch.empty(want[k1].numel() + want[k2].numel())
    dst = {k1: shared[:want[k1].numel()].view_as(want[k1]), k2: shared[1:1 + want[k2].numel()].view_as(want[k2])}
    with pytest.raises(ringsafe.SafetensorError, match="overlap"):
        rpt.read_into(path, dst)
    with pytest.raises(ringsafe.SafetensorError, match="the destination holds"):
        rpt.read_into(path, {k1: torch.empty(3)})


def test_memory_numpy_cannot_view_is_read(ckpt, loads):
    # A parameter with its conjugate bit set (load_model fills its bytes as they lie):
    # NumPy cannot view it, so the whole load reads instead of copying.
    _, path, want = ckpt
    z = torch.zeros(4, dtype=torch.complex64).conj()
    assert ADAPTER.byte_view(z) is None
    r = ringsafe.Reader(path)
    try:
        infos = r.tensors()
        how = _caller_memory.mapped_or_read(r, path, options={}, infos=infos,
                                            byte_views=_caller_memory.byte_views(ADAPTER, [z]))
        assert (how.how, how.maps, how.views) == ("reader", None, None) and how.reader is r
        how = _caller_memory.mapped_or_read(r, path, options={}, infos=infos,
                                            byte_views=_caller_memory.byte_views(ADAPTER, []))
        assert how.how == "mapped" and how.maps is not None and how.views == [] and how.reader is r
    finally:
        r.close()
    assert loads() == {"reader": 1, "mapped": 1}


def test_numpy_read_into_is_copied_from_the_mapping(tmp_path, loads, monkeypatch):
    monkeypatch.setattr(_caller_memory, "COPY_MIN_BYTES", 0)
    path = tmp_path / "n.safetensors"
    want = {"a": np.arange(5000, dtype=np.float32).reshape(50, 100), "b": np.arange(7, dtype=np.int16)}
    rnp.save_file(want, str(path))
    warm(path)
    dst = {k: np.zeros_like(v) for k, v in want.items()}
    rnp.read_into(str(path), dst)
    for k in want:
        assert np.array_equal(dst[k], want[k])
    assert loads() == {"mapped": 1}


def test_a_file_changed_after_the_reader_opened_it_is_not_copied_from(ckpt, tmp_path):
    _, path, want = ckpt
    r = ringsafe.Reader(path)
    try:
        infos = r.tensors()
        # Another file renamed over the path: the reader reads the one it parsed.
        other = tmp_path / "other.safetensors"
        spt.save_file({k: v + 1 for k, v in want.items()}, str(other))
        os.replace(path, str(tmp_path / "kept.safetensors"))
        os.replace(other, path)
        warm(path)
        assert _caller_memory.mapped_when_hot(r, {}, infos) is None
    finally:
        r.close()
    r = ringsafe.Reader(path)
    try:
        infos = r.tensors()
        # Rewritten in place (same size, new bytes and time): ObjectChanged, as the mmap backend says.
        data = bytearray(open(path, "rb").read())
        data[-1] ^= 0xFF
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(10**9, 10**9))  # a time surely not the one the reader saw (one tick may hold both)
        with pytest.raises(ringsafe.SafetensorError, match="rewritten in place") as e:
            _caller_memory.mapped_when_hot(r, {}, infos)
        assert e.value.kind == "ObjectChanged"
    finally:
        r.close()

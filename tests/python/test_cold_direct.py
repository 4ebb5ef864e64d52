"""Loads into memory the caller holds (load_model, read_into) read a cold
local checkpoint with O_DIRECT, a cached one through the page cache, and an
explicit direct= as given; loads into fresh memory stay buffered; the bytes
are the file's either way (ringsafe._caller_memory.direct_when_cold)."""

import pytest

import ringsafe  # from the build tree without PYTHONPATH (conftest)
from ringsafe import _caller_memory, _source
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from torch import nn

from conftest import evict, warm


@pytest.fixture
def opened(monkeypatch):
    """The options of every Reader the loads open, in order."""
    out = []
    real = _source.Reader
    monkeypatch.setattr(_source, "Reader", lambda spec, **o: out.append(dict(o)) or real(spec, **o))
    return out


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    """A model and its 16 MiB checkpoint (DIRECT_MIN_BYTES lowered to 1 MiB for
    the test; large enough that the header's read-ahead stays under 10 %);
    skipped where the filesystem refuses O_DIRECT."""
    monkeypatch.setattr(_caller_memory, "DIRECT_MIN_BYTES", 1 << 20)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.Linear(2048, 1024))
    path = tmp_path / "m.safetensors"
    spt.save_model(model, str(path))
    try:
        ringsafe.Reader(str(path), direct=True).close()
    except (OSError, ringsafe.SafetensorError) as e:
        pytest.skip(f"no O_DIRECT here: {e}")
    evict(str(path))
    m = ringsafe._ringsafe.MappedFile(str(path))
    if m.resident(0, m.size) * 10 >= m.size:
        pytest.skip("this filesystem keeps the file in memory (tmpfs): it cannot be made cold")
    want = {k: v.clone() for k, v in model.state_dict().items()}
    for p in model.parameters():
        p.data.zero_()
    return model, str(path), want


def same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k


def test_load_model_of_a_cold_file_reads_with_o_direct(ckpt, opened):
    model, path, want = ckpt
    evict(path)
    assert rpt.load_model(model, path) == (set(), [])
    assert [o.get("direct") for o in opened] == [None, True]  # looked, then reopened direct
    same(model.state_dict(), want)


def test_read_into_a_cold_file_reads_with_o_direct(ckpt, opened):
    _, path, want = ckpt
    evict(path)
    dst = {k: torch.empty_like(v) for k, v in want.items()}
    rpt.read_into(path, dst)
    same(dst, want)
    assert [o.get("direct") for o in opened] == [None, True]


def test_loads_into_fresh_memory_stay_buffered(ckpt, opened):
    _, path, want = ckpt
    evict(path)
    same(rpt.load_file(path, backend="pread"), want)
    evict(path)
    same(dict(rpt.iter_tensors(path)), want)
    evict(path)
    with ringsafe.safe_open(path, "pt", backend="pread") as f:
        same({k: f.get_tensor(k) for k in f.keys()}, want)
    assert [o.get("direct") for o in opened] == [None, None, None]


def test_a_cached_file_a_mapped_load_and_an_explicit_choice_stay_as_they_are(ckpt, opened):
    model, path, want = ckpt
    warm(path)
    rpt.load_model(model, path)
    same(model.state_dict(), want)
    assert [o.get("direct") for o in opened] == [None]  # one open, no reopen
    evict(path)
    opened.clear()
    same(rpt.load_file(path), want)  # the mapped backend fills the page cache: it maps it
    evict(path)
    rpt.load_model(model, path, direct=False)
    evict(path)
    same(rpt.load_file(path, backend="pread", direct=True), want)
    assert [o.get("direct") for o in opened] == [None, False, True]


def test_a_small_cold_load_stays_buffered(ckpt, opened, monkeypatch):
    model, path, want = ckpt
    monkeypatch.setattr(_caller_memory, "DIRECT_MIN_BYTES", 64 << 20)
    evict(path)
    rpt.load_model(model, path)
    assert [o.get("direct") for o in opened] == [None]
    same(model.state_dict(), want)


def test_a_sharded_index_reads_with_o_direct_when_cold(ckpt, opened, tmp_path):
    model, path, want = ckpt
    import json
    names = sorted(want)
    shards = {}
    for i, part in enumerate((names[:2], names[2:])):
        f = f"model-0000{i + 1}-of-00002.safetensors"
        spt.save_file({k: want[k] for k in part}, str(tmp_path / f))
        evict(str(tmp_path / f))
        shards.update({k: f for k in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": shards}))
    assert rpt.load_model(model, str(index)) == (set(), [])
    same(model.state_dict(), want)
    assert [o.get("direct") for o in opened] == [None, True]


def test_a_selection_is_judged_by_its_own_bytes(ckpt, opened, monkeypatch):
    _, path, want = ckpt
    big = max(want, key=lambda k: want[k].numel())
    small = min(want, key=lambda k: want[k].numel())
    # A small selection of a cold file: under DIRECT_MIN_BYTES, buffered.
    dst = {small: torch.empty_like(want[small])}
    rpt.read_into(path, dst)
    same(dst, {small: want[small]})
    assert [o.get("direct") for o in opened] == [None]
    # The selected tensor cached, the rest of the file cold: buffered, it is in the page cache.
    monkeypatch.setattr(_caller_memory, "DIRECT_MIN_BYTES", 0)
    evict(path)
    rpt.load_file(path, select=[small])  # the mapped load leaves it cached
    opened.clear()
    rpt.read_into(path, dst)
    same(dst, {small: want[small]})
    assert [o.get("direct") for o in opened] == [None]
    # A cold selection: direct.
    evict(path)
    opened.clear()
    dst = {big: torch.empty_like(want[big])}
    rpt.read_into(path, dst)
    same(dst, {big: want[big]})
    assert [o.get("direct") for o in opened] == [None, True]

"""backend="mmap": what a load hands out is resident before the call returns,
a get_tensor loop reads the rest of the file ahead, pages are shared between
processes, and populate() runs in parallel and can be interrupted."""

import os
import subprocess
import sys
import time

import pytest
import ringsafe
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from conftest import evict
from ringsafe import _mapped
from ringsafe._described import FileRange, MemorySpan
from ringsafe._ringsafe import MappedFile


def _resident(path):
    m = MappedFile(str(path))
    return m.resident(0, m.size) / max(m.size, 1)


@pytest.fixture
def layers(tmp_path):
    """16 tensors of 4 MiB, evicted from the page cache (skips where that is impossible)."""
    g = torch.Generator().manual_seed(0)
    tensors = {f"layer.{i:02d}": torch.randn(1024, 1024, generator=g) for i in range(16)}
    path = tmp_path / "layers.safetensors"
    spt.save_file(tensors, str(path))
    evict(path)
    if _resident(path) > 0.1:
        pytest.skip("the file cannot be evicted from the page cache here")
    return path, tensors


def test_load_file_makes_every_byte_resident_before_it_returns(layers):
    path, tensors = layers
    got = rpt.load_file(str(path))
    assert _resident(path) > 0.99
    for k, v in tensors.items():
        assert torch.equal(got[k], v)


def test_a_get_tensor_loop_reads_ahead_and_slices_do_not(layers):
    path, tensors = layers
    with ringsafe.safe_open(str(path), "pt") as f:
        f.get_slice("layer.00")[:2]  # slices alone read only what they slice
        time.sleep(0.3)
        assert _resident(path) < 0.5
        first = f.get_tensor("layer.00")  # the first whole tensor starts the read-ahead
        deadline = time.monotonic() + 20
        while _resident(path) < 0.99 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _resident(path) > 0.99, "the rest of the file was not read ahead"
        assert torch.equal(first, tensors["layer.00"])
        for k in f.keys():
            assert torch.equal(f.get_tensor(k), tensors[k])


def test_mapped_file_populate_reports_and_parallelises(layers):
    path, _ = layers
    m = MappedFile(str(path))
    got = m.populate([(0, m.size)], 0)
    assert got.bytes == m.size and got.cold_bytes > 0 and got.threads > 2  # cold: more reads in flight than cores
    got = m.populate([(0, m.size)], 0)
    assert got.cold_bytes == 0 and got.threads >= 2


@pytest.fixture
def small(tmp_path):
    """A checkpoint of a 2 MiB tensor and an 8-byte one (cached or not: what matters is the ranges)."""
    tensors = {"big": torch.arange(1 << 19, dtype=torch.float32), "small": torch.ones(2)}
    path = tmp_path / "small.safetensors"
    spt.save_file(tensors, str(path))
    return path, tensors


def test_populate_takes_file_range_records_and_still_tuples(small):
    path, _ = small
    m = MappedFile(str(path))
    assert m.populate([FileRange(0, 100), FileRange(offset=100, length=m.size - 100)], 1).bytes == m.size
    assert m.populate([(0, 100), FileRange(100, 50)]).bytes == 150  # the tuples of before are also accepted
    assert m.populate(((0, 8),)).bytes == 8  # any sequence


def test_populate_refuses_an_element_of_another_shape(small):
    path, _ = small
    m = MappedFile(str(path))
    expected = r"MappedFile.populate takes FileRange records or \(offset, length\) tuples"
    with pytest.raises(TypeError, match=expected + ", not MemorySpan$"):
        m.populate([FileRange(0, 8), MemorySpan(0, 8)])
    with pytest.raises(TypeError, match=expected + ", not int$"):
        m.populate([8])
    with pytest.raises(ringsafe.SafetensorError, match=expected + "; got a tuple of 3") as e:
        m.populate([(0, 8, 1)])
    assert e.value.kind == "InvalidArgument"
    with pytest.raises(TypeError, match="length must be an int, not str"):
        m.populate([FileRange(0, "8")])
    with pytest.raises(ringsafe.SafetensorError, match="offset must not be negative, got -1"):
        m.populate([FileRange(-1, 8)])


class _RecordingMapping(MappedFile):
    """A MappedFile noting the ranges populate() is given."""

    seen: list = []

    def populate(self, ranges, *args):
        self.seen.extend(ranges)
        return super().populate(ranges, *args)


def test_the_mmap_backend_hands_the_mapping_file_range_records(small, monkeypatch):
    # No positional tuple crosses into the extension: the header check, a whole tensor, a box and a load
    # pass FileRange records.
    path, tensors = small
    monkeypatch.setattr(_RecordingMapping, "seen", [])
    monkeypatch.setattr(_mapped, "MappedFile", _RecordingMapping)
    with ringsafe.safe_open(str(path), "pt") as f:
        assert torch.equal(f.get_tensor("big"), tensors["big"])  # >= POPULATE_MIN: populated
        assert torch.equal(f.get_slice("big")[: (1 << 19) - 1], tensors["big"][:-1])  # a box of 2 MiB - 4
    got = rpt.load_file(str(path))
    assert all(torch.equal(got[k], tensors[k]) for k in tensors)
    seen = _RecordingMapping.seen
    assert len(seen) == 1 + 1 + 1 + 1 + 2 and all(type(r) is FileRange for r in seen), seen


def test_processes_share_the_pages_of_one_file(layers):
    path, _ = layers
    code = ("import sys, ringsafe.torch as rpt\n"
            f"d = rpt.load_file({str(path)!r})\n"
            "print('loaded', flush=True)\n"
            "sys.stdin.readline()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(3)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "loaded"
        size = os.path.getsize(path)
        for p in procs:
            rss = pss = 0
            with open(f"/proc/{p.pid}/smaps") as f:
                inside = False
                for line in f:
                    first = line.split()[0]
                    if "-" in first and not first.endswith(":"):
                        inside = line.rstrip().endswith(str(path))
                    elif inside and first == "Rss:":
                        rss += int(line.split()[1]) * 1024
                    elif inside and first == "Pss:":
                        pss += int(line.split()[1]) * 1024
            assert rss > 0.99 * size
            assert pss < 0.5 * size  # three processes (and the page cache) share the pages
    finally:
        for p in procs:
            p.stdin.write("\n")
            p.stdin.close()
            p.wait(timeout=60)


def test_ctrl_c_ends_a_cold_populate(layers):
    path, _ = layers
    code = ("import os, signal, threading, time\n"
            "from ringsafe._ringsafe import MappedFile\n"
            f"m = MappedFile({str(path)!r})\n"
            "threading.Timer(0.01, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
            "try:\n"
            "    for _ in range(200):\n"
            "        m.populate([(0, m.size)], 1)\n"
            "        os.posix_fadvise(os.open(m.path, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)\n"
            "    print('never interrupted')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "interrupted", out.stderr

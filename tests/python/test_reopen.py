"""Checked reopens: a loader that opens a local checkpoint a second time (the
O_DIRECT reader of a cold load, the mapping of backend="mmap") uses what it
opened only when it is the file whose header it parsed: the same identity,
size and modification time, and the same header. And what a mapped file
truncated under live views does (as the reference: SIGBUS when a page past
the new end is touched), shown in a child process."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import ringsafe
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from ringsafe import _caller_memory, _source
from ringsafe._mapped import MappedSource

# Two checkpoints of the same size and header length, with other layouts: an
# F32 [4] and an F16 [8] tensor (16 bytes each), swapped.
ORIGINAL = {"a": torch.arange(4, dtype=torch.float32), "b": torch.arange(8, dtype=torch.float16)}
SWAPPED = {"a": torch.full((8,), 7, dtype=torch.float16), "b": torch.full((4,), 9, dtype=torch.float32)}


def _pair(tmp_path):
    path, other = tmp_path / "m.safetensors", tmp_path / "other.safetensors"
    spt.save_file(ORIGINAL, str(path))
    spt.save_file(SWAPPED, str(other))
    assert path.stat().st_size == other.stat().st_size and path.read_bytes()[:8] == other.read_bytes()[:8]
    return path, other


def _between(monkeypatch, change):
    """Runs ``change`` between the header read and the O_DIRECT reopen of a cold
    load (in place of the residency check, which then says "cold")."""
    def cold(reader, infos):
        change()
        return True
    monkeypatch.setattr(_caller_memory, "_cold_local", cold)


def test_a_file_renamed_over_the_checkpoint_before_the_direct_reopen_is_not_read(tmp_path, monkeypatch):
    path, other = _pair(tmp_path)
    _between(monkeypatch, lambda: os.replace(other, path))
    dst = {"a": torch.zeros(4, dtype=torch.float32), "b": torch.zeros(8, dtype=torch.float16)}
    rpt.read_into(str(path), dst)
    # The reader that parsed the header still holds the original: its bytes, not the other layout's.
    assert torch.equal(dst["a"], ORIGINAL["a"]) and torch.equal(dst["b"], ORIGINAL["b"])


def test_a_checkpoint_rewritten_in_place_before_the_direct_reopen_is_refused(tmp_path, monkeypatch):
    path, other = _pair(tmp_path)
    stat = path.stat()

    def rewrite():
        with open(path, "r+b") as f:
            f.write(other.read_bytes())
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old time, the header differs

    _between(monkeypatch, rewrite)
    dst = {"a": torch.zeros(4, dtype=torch.float32), "b": torch.zeros(8, dtype=torch.float16)}
    with pytest.raises(ringsafe.SafetensorError, match="rewritten") as e:
        rpt.read_into(str(path), dst)
    assert e.value.kind == "ObjectChanged"
    assert not dst["a"].any() and not dst["b"].any()


@pytest.mark.parametrize("how", ["same layout, later time", "other layout, same time"])
def test_a_rewrite_in_place_between_the_header_and_the_mapping_is_caught(tmp_path, how):
    path, other = _pair(tmp_path)
    reader = _source.open_reader(str(path), {})
    try:
        stat = path.stat()
        new = spt.save({k: v + 1 for k, v in ORIGINAL.items()}) if how.startswith("same") else other.read_bytes()
        assert len(new) == stat.st_size
        with open(path, "r+b") as f:
            f.write(new)
        # Timestamps are as fine as the file system keeps them: set them outright.
        later = stat.st_mtime_ns + (10**9 if how.startswith("same") else 0)
        os.utime(path, ns=(stat.st_atime_ns, later))
        assert path.stat().st_ino == stat.st_ino
        with pytest.raises(ringsafe.SafetensorError, match="rewritten in place|header changed") as e:
            MappedSource(reader)
        assert e.value.kind == "ObjectChanged"
    finally:
        reader.close()


_TRUNCATE = """
import os, sys
import torch
import safetensors.torch as spt
import ringsafe, ringsafe.torch as rpt

path, how = sys.argv[1], sys.argv[2]
spt.save_file({"w": torch.arange(1 << 20, dtype=torch.float32)}, path)
if how == "before the load":
    # Cut short between the header read and the mapping's population: an error, not a signal.
    with ringsafe.safe_open(path, "pt") as f:
        os.truncate(path, 4096)
        try:
            f.get_tensor("w")
        except ringsafe.SafetensorError as e:
            print("error", e.kind)
    sys.exit(0)
if how == "reference":
    import safetensors
    t = spt.load_file(path)["w"]
else:
    t = rpt.load_file(path, backend=how)["w"]
os.truncate(path, 4096)
print("sum", float(t.sum()), flush=True)
"""


@pytest.mark.parametrize("how", ["reference", "mmap", "pread", "before the load"])
def test_a_mapped_file_truncated_under_live_tensors(tmp_path, how):
    # The reference's tensors are views of a mapping: touching a page past the
    # new end raises SIGBUS. ringsafe's mmap views are the same (README, "Backends
    # and memory"): a file that may be rewritten in place is for backend="pread",
    # whose tensors own their bytes. A file cut short before the views are handed
    # out (while the load makes them resident) is a Truncated error.
    script = tmp_path / "truncate.py"
    script.write_text(_TRUNCATE)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "t.safetensors"), how], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    if how in ("reference", "mmap"):
        assert out.returncode == -signal.SIGBUS, (out.returncode, out.stdout, out.stderr)
        assert "sum" not in out.stdout
    elif how == "pread":
        assert out.returncode == 0 and out.stdout.strip() == f"sum {float(sum(range(1 << 20)))}", out.stderr
    else:
        assert out.returncode == 0 and out.stdout.strip() == "error Truncated", (out.stdout, out.stderr)

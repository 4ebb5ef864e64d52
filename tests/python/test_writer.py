"""ringsafe.Writer and save_file: files the reference reads back, nothing
left behind on failure (exceptions, refusals, real I/O errors), append,
write_bytes, metadata, duplicates, the reference's refusals, atomic replace."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPATH = str(ROOT / "build" / "engine" / "python")
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, PYPATH)
    import ringsafe
import ringsafe.torch as rpt
import safetensors
import safetensors.torch as spt
import torch

MiB = 1 << 20


def _ref_read(path):
    with safetensors.safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def _bytes(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and _bytes(a) == _bytes(b)


def _tensors():
    g = torch.Generator().manual_seed(3)
    return {
        "a": torch.randn(33, 7, generator=g),
        "b": torch.arange(100, dtype=torch.int32),
        "c": torch.randn(5, 5, generator=g).to(torch.bfloat16),
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(-0.0, dtype=torch.float64),
        "flag": torch.tensor([True, False, True]),
        "big": torch.arange(3 * MiB, dtype=torch.int32),  # 12 MiB: past the writer's staging chunks
    }


# --- Writer ---------------------------------------------------------------------

def _thread_wchar():
    """Bytes the calling thread has passed to write(2) and kin so far."""
    with open("/proc/thread-self/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["wchar"])


def test_buffered_save_writes_on_the_calling_thread(tmp_path):
    """save_file(sync=False) writes the data through the page cache on the thread
    that called it (on another thread the new pages come from another CPU's
    free lists: bench/README.md, saves), in one file the reference reads back."""
    tensors = {f"t{i}": torch.full((3 * MiB + i,), float(i), dtype=torch.float32) for i in range(4)}
    path = tmp_path / "calling.safetensors"
    before = _thread_wchar()
    rpt.save_file(tensors, path, sync=False)
    written = _thread_wchar() - before
    data = sum(t.numel() * t.element_size() for t in tensors.values())
    assert written >= data, (written, data)
    back, _ = _ref_read(path)
    for k, v in tensors.items():
        assert torch.equal(back[k], v), k


def test_writer_read_back_by_reference(tmp_path):
    path = tmp_path / "w.safetensors"
    tensors = _tensors()
    with ringsafe.Writer(str(path), metadata={"format": "pt", "x": "1"}) as w:
        for k, v in tensors.items():
            w.write(k, v)
        w.write("np", np.arange(12, dtype=np.float64).reshape(3, 4))
    assert w.stats is not None
    got, md = _ref_read(path)
    assert md == {"format": "pt", "x": "1"}
    assert sorted(got) == sorted(list(tensors) + ["np"])
    for k, v in tensors.items():
        assert _equal(got[k], v), k
    assert _equal(got["np"], torch.arange(12, dtype=torch.float64).reshape(3, 4))
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_writer_finish_metadata_and_empty(tmp_path):
    path = tmp_path / "w.safetensors"
    w = ringsafe.Writer(str(path), metadata={"from": "ctor"})
    w.write("x", torch.ones(3))
    assert not path.exists()  # nothing at the path before finish
    stats = w.finish(metadata={"from": "finish"})
    assert isinstance(stats, dict)
    got, md = _ref_read(path)
    assert md == {"from": "finish"}
    assert _equal(got["x"], torch.ones(3))
    # a writer with no tensors makes a valid empty file
    empty = tmp_path / "empty.safetensors"
    with ringsafe.Writer(str(empty)):
        pass
    got, md = _ref_read(empty)
    assert got == {}


@pytest.mark.parametrize("size", [1000, 64 * MiB])
def test_writer_exception_leaves_nothing(tmp_path, size):
    path = tmp_path / "w.safetensors"
    with pytest.raises(KeyError):
        with ringsafe.Writer(str(path)) as w:
            w.write("a", torch.ones(size // 4))
            w.write("b", torch.ones(size // 4))
            raise KeyError("boom")
    assert not path.exists()
    assert os.listdir(tmp_path) == []
    # the path is usable afterwards
    with ringsafe.Writer(str(path)) as w:
        w.write("a", torch.arange(4))
    assert _equal(_ref_read(path)[0]["a"], torch.arange(4))


def test_writer_exception_keeps_existing_file(tmp_path):
    path = tmp_path / "w.safetensors"
    spt.save_file({"old": torch.arange(5)}, str(path))
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with ringsafe.Writer(str(path)) as w:
            w.write("new", torch.ones(4 * MiB))
            raise RuntimeError("boom")
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_writer_abandon(tmp_path):
    path = tmp_path / "w.safetensors"
    w = ringsafe.Writer(str(path))
    w.write("a", torch.ones(MiB))
    w.abandon()
    assert os.listdir(tmp_path) == []


def test_writer_append(tmp_path):
    path = tmp_path / "w.safetensors"
    old = {"a": torch.arange(10, dtype=torch.float32), "b": torch.ones(3, 3, dtype=torch.int64)}
    with ringsafe.Writer(str(path), metadata={"m": "1"}) as w:
        for k, v in old.items():
            w.write(k, v)
    new = torch.arange(20, dtype=torch.float16).reshape(4, 5)
    with ringsafe.Writer(str(path), append=True) as w:
        w.write("c", new)
        w.write("d", np.arange(6, dtype=np.uint8))
    got, md = _ref_read(path)
    assert sorted(got) == ["a", "b", "c", "d"]
    for k, v in old.items():
        assert _equal(got[k], v)
    assert _equal(got["c"], new)
    assert _equal(got["d"], torch.arange(6, dtype=torch.uint8))
    assert md == {"m": "1"}
    # an append that fails keeps the file as it was
    before = path.read_bytes()
    with pytest.raises(ValueError):
        with ringsafe.Writer(str(path), append=True) as w:
            w.write("e", torch.ones(MiB))
            raise ValueError("boom")
    assert path.read_bytes() == before
    # appending a name already in the file is refused
    with pytest.raises(ringsafe.SafetensorError):
        with ringsafe.Writer(str(path), append=True) as w:
            w.write("a", torch.ones(2))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_writer_append_without_header_room_keeps_file(tmp_path):
    # The reference's files reserve no header space: appending there is
    # refused with a clear error and the file stays as it was.
    path = tmp_path / "w.safetensors"
    spt.save_file({"a": torch.arange(10, dtype=torch.float32)}, str(path))
    before = path.read_bytes()
    with pytest.raises(ringsafe.SafetensorError):
        with ringsafe.Writer(str(path), append=True) as w:
            w.write("c", torch.ones(4, 5))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_writer_write_bytes(tmp_path):
    path = tmp_path / "w.safetensors"
    arr = np.arange(6, dtype="<f4").reshape(2, 3)
    with ringsafe.Writer(str(path)) as w:
        w.write_bytes("raw", "F32", [2, 3], arr.tobytes())
        w.write_bytes("bf", "BF16", (2,), bytes([0x80, 0x3F, 0x00, 0x40]))  # 1.0, 2.0
        w.write_bytes("mv", "I16", (3,), memoryview(np.array([1, -2, 3], dtype="<i2")))
        w.write_bytes("ba", "U8", (4,), bytearray(b"\x01\x02\x03\xff"))
        w.write_bytes("none", "F64", (0, 3), b"")
    got, _ = _ref_read(path)
    assert _equal(got["raw"], torch.from_numpy(arr))
    assert _equal(got["bf"], torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    assert _equal(got["mv"], torch.tensor([1, -2, 3], dtype=torch.int16))
    assert _equal(got["ba"], torch.tensor([1, 2, 3, 255], dtype=torch.uint8))
    assert _equal(got["none"], torch.zeros(0, 3, dtype=torch.float64))


def test_writer_write_bytes_size_mismatch(tmp_path):
    path = tmp_path / "w.safetensors"
    with ringsafe.Writer(str(path)) as w:
        with pytest.raises(ringsafe.SafetensorError):
            w.write_bytes("short", "F32", (2, 3), b"\x00" * 20)
        w.write("ok", torch.ones(2))
    got, _ = _ref_read(path)
    assert sorted(got) == ["ok"]


def test_writer_duplicate_name_then_usable(tmp_path):
    path = tmp_path / "w.safetensors"
    with ringsafe.Writer(str(path)) as w:
        w.write("a", torch.ones(4))
        with pytest.raises(ringsafe.SafetensorError, match="'a'") as e:
            w.write("a", torch.zeros(4))
        assert e.value.kind == "DuplicateTensorName"
        w.write("b", torch.full((2,), 5.0))
    got, _ = _ref_read(path)
    assert sorted(got) == ["a", "b"]
    assert _equal(got["a"], torch.ones(4))
    assert _equal(got["b"], torch.full((2,), 5.0))


def test_writer_rejects_non_tensor_then_usable(tmp_path):
    path = tmp_path / "w.safetensors"
    with ringsafe.Writer(str(path)) as w:
        with pytest.raises(TypeError):
            w.write("x", [1, 2, 3])
        w.write("y", torch.ones(2))
    assert sorted(_ref_read(path)[0]) == ["y"]


@pytest.mark.parametrize("metadata", [{"k": 1}, {1: "v"}, ["k", "v"]])
def test_writer_bad_metadata(tmp_path, metadata):
    path = tmp_path / "w.safetensors"
    with pytest.raises(TypeError):
        with ringsafe.Writer(str(path), metadata=metadata) as w:
            w.write("x", torch.ones(2))
    w = ringsafe.Writer(str(path))
    w.write("x", torch.ones(2))
    with pytest.raises(TypeError):
        w.finish(metadata=metadata)
    w.abandon()
    assert os.listdir(tmp_path) == []


# --- save_file ------------------------------------------------------------------

def test_save_file_read_back_and_like_reference(tmp_path):
    tensors = {k: v for k, v in _tensors().items() if k != "big"}
    ours, ref = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    rpt.save_file(tensors, str(ours), metadata={"a": "b"})
    spt.save_file(tensors, str(ref), metadata={"a": "b"})
    assert ours.read_bytes() == ref.read_bytes()
    got, md = _ref_read(ours)
    assert md == {"a": "b"}
    for k, v in tensors.items():
        assert _equal(got[k], v)


def _refusals():
    base = torch.zeros(10)
    ok = torch.arange(MiB, dtype=torch.float32)  # a valid tensor before the bad one
    return [
        ("noncontig", {"ok": ok, "x": torch.zeros(4, 6).t(), "z": torch.ones(3)}, ValueError),
        ("shared", {"ok": ok, "x": base, "y": base[2:]}, RuntimeError),
        ("same", {"x": base, "y": base}, RuntimeError),
        ("nontensor", {"ok": ok, "x": [1, 2, 3], "z": torch.ones(3)}, ValueError),
        ("notadict", [("x", torch.zeros(2))], ValueError),
        ("metadata", {"x": torch.zeros(2)}, TypeError),
        ("metadata_key", {"x": torch.zeros(2)}, TypeError),
    ]


def _metadata_for(name):
    return {"metadata": {"k": 1}, "metadata_key": {1: "v"}}.get(name)


@pytest.mark.parametrize("case", _refusals(), ids=lambda c: c[0])
def test_save_file_refusals_like_reference(tmp_path, case):
    name, tensors, exc = case
    metadata = _metadata_for(name)
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    with pytest.raises(exc):
        spt.save_file(tensors, str(ref_dir / "x.safetensors"), metadata=metadata)
    ours = tmp_path / "ours"
    ours.mkdir()
    path = ours / "x.safetensors"
    with pytest.raises(exc):
        rpt.save_file(tensors, str(path), metadata=metadata)
    assert os.listdir(ours) == []
    with pytest.raises(exc):
        rpt.save(tensors, metadata=metadata)


@pytest.mark.parametrize("case", _refusals(), ids=lambda c: c[0])
def test_save_over_existing_keeps_old(tmp_path, case):
    name, tensors, exc = case
    path = tmp_path / "x.safetensors"
    spt.save_file({"old": torch.arange(7, dtype=torch.int16)}, str(path))
    before = path.read_bytes()
    with pytest.raises(exc):
        rpt.save_file(tensors, str(path), metadata=_metadata_for(name))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["x.safetensors"]


def test_save_file_replaces_atomically(tmp_path):
    path = tmp_path / "x.safetensors"
    old = {"old": torch.arange(7, dtype=torch.int16)}
    spt.save_file(old, str(path))
    before = path.read_bytes()
    inode = path.stat().st_ino
    with open(path, "rb") as held:  # a reader that opened the old file
        new = {"new": torch.arange(2 * MiB, dtype=torch.float32)}
        rpt.save_file(new, str(path))
        # the old file was replaced by a new one (rename), not rewritten in place
        assert held.read() == before
    assert path.stat().st_ino != inode
    got, _ = _ref_read(path)
    assert sorted(got) == ["new"]
    assert _equal(got["new"], new["new"])
    assert os.listdir(tmp_path) == ["x.safetensors"]


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_save_file_and_writer_keep_the_permissions_of_the_file_they_replace(tmp_path, mode):
    path = tmp_path / "x.safetensors"
    for write in (lambda: rpt.save_file({"a": torch.arange(3)}, str(path)),
                  lambda: _write_with_writer(path)):
        path.write_bytes(b"old")
        path.chmod(mode)
        write()
        assert path.stat().st_mode & 0o7777 == mode
    # A new file: 0666 less the umask.
    path.unlink()
    old = os.umask(0o002)
    try:
        rpt.save_file({"a": torch.arange(3)}, str(path))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o7777 == 0o664


def _write_with_writer(path):
    with ringsafe.Writer(str(path)) as w:
        w.write("a", torch.arange(3))


# --- real I/O failures (a file size limit in a subprocess) ------------------------

FSIZE_SCRIPT = textwrap.dedent("""
    import json, os, resource, signal, sys
    import torch
    import ringsafe, ringsafe.torch as rpt

    what, path = sys.argv[1], sys.argv[2]
    # writes past 8 MiB fail with EFBIG instead of killing the process
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, resource.RLIM_INFINITY))
    tensors = {f"s{i}": torch.full((1 << 20,), float(i)) for i in range(8)}  # 32 MiB
    error = None
    try:
        if what == "save_file":
            rpt.save_file(tensors, path, sync=True)
        else:
            with ringsafe.Writer(path, append=(what == "append")) as w:
                for k, v in tensors.items():
                    w.write(k, v)
    except Exception as e:
        error = [type(e).__name__, str(e), isinstance(e, OSError), getattr(e, "filename", None)]
    # the process keeps working: a small file under the limit
    small = os.path.join(os.path.dirname(path), "small.safetensors")
    rpt.save_file({"x": torch.arange(5)}, small)
    ok = bool(torch.equal(rpt.load_file(small)["x"], torch.arange(5)))
    os.unlink(small)
    print("RESULT " + json.dumps(dict(error=error, ok=ok)))
""")


@pytest.mark.parametrize("what", ["save_file", "writer", "append"])
def test_write_error_keeps_old_file(tmp_path, what):
    path = tmp_path / "x.safetensors"
    if what == "append":
        with ringsafe.Writer(str(path)) as w:
            w.write("old", torch.arange(7, dtype=torch.int16))
    else:
        spt.save_file({"old": torch.arange(7, dtype=torch.int16)}, str(path))
    before = path.read_bytes()
    env = dict(os.environ)
    env["PYTHONPATH"] = PYPATH + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", FSIZE_SCRIPT, what, str(path)],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    r = json.loads(lines[-1][len("RESULT "):])
    assert r["error"] is not None, "a write past RLIMIT_FSIZE succeeded"
    assert r["error"][2], r["error"]  # an OSError (EFBIG)
    assert "too large" in r["error"][1].lower(), r["error"]
    assert r["error"][3] == str(path), r["error"]  # OSError.filename: the file being written
    assert r["ok"]
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["x.safetensors"]


# --- sync=True: O_DIRECT --------------------------------------------------------

def test_save_file_sync_writes_the_references_bytes_past_the_page_cache(tmp_path):
    g = torch.Generator().manual_seed(3)
    tensors = {"big": torch.randn(3 * MiB + 5, generator=g).to(torch.bfloat16),  # spans several 8 MiB blocks
               "odd": torch.randint(0, 255, (4097,), dtype=torch.uint8, generator=g),
               "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5, dtype=torch.float64),
               "f32": torch.randn(1000, 37, generator=g)}
    ref, mine, buffered = tmp_path / "ref.safetensors", tmp_path / "mine.safetensors", tmp_path / "buf.safetensors"
    spt.save_file(tensors, str(ref), metadata={"format": "pt"})
    rpt.save_file(tensors, str(mine), metadata={"format": "pt"}, sync=True)
    rpt.save_file(tensors, str(buffered), metadata={"format": "pt"})
    try:
        os.close(os.open(str(tmp_path / "probe"), os.O_CREAT | os.O_WRONLY | os.O_DIRECT))
    except OSError:
        pytest.skip("no O_DIRECT on this filesystem")
    m, b = ringsafe._ringsafe.MappedFile(str(mine)), ringsafe._ringsafe.MappedFile(str(buffered))
    assert m.resident(0, m.size) <= 4096  # went straight to the disk
    assert b.resident(0, b.size) == b.size  # sync=False: left in the page cache for the kernel to write back
    del m, b
    assert mine.read_bytes() == ref.read_bytes() == buffered.read_bytes()

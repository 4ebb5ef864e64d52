"""The calls (safe_open, load_file, read_into, iter_tensors, save_file) beyond
format conformance: errors for
closed handles, bad frameworks and devices, missing files and tensors,
select=, read_into in place (and its refusals before any I/O), the streaming
iterator, progress reporting, view lifetimes, the GIL released during reads
and writes, concurrent loads from several threads.

RINGSAFE_TEST_BIG_MIB (default 1024) sets the size of the file the GIL tests
load and save."""

import errno
import gc
import os
import pathlib
import re
import sys
import threading
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.numpy as rnp
from conftest import evict  # noqa: E402
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch

MiB = 1 << 20
BIG = int(os.environ.get("RINGSAFE_TEST_BIG_MIB", "1024")) * MiB
HANG = 120  # seconds after which a call that should have returned counts as hung


def _tensors():
    g = torch.Generator().manual_seed(7)
    return {
        "model.layers.0.attn.weight": torch.randn(64, 32, generator=g),
        "model.layers.0.mlp.weight": torch.randn(32, 16, generator=g),
        "model.layers.1.attn.weight": torch.randn(64, 32, generator=g),
        "model.embed": torch.arange(1000, dtype=torch.int64).reshape(10, 100),
        "lm_head.bias": torch.randn(17, generator=g).to(torch.float16),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
    }


def _bytes(t):
    """The raw bytes of a CPU tensor or array (exact comparison, -0.0 and NaN included)."""
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).tobytes()
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and _bytes(a) == _bytes(b)


def _data_bytes(tensors):
    return sum(v.numel() * v.element_size() for v in tensors.values())


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.safetensors"
    tensors = _tensors()
    spt.save_file(tensors, str(path), metadata={"k": "v"})
    return path, tensors


def _chunky(tmp_path, name="chunky.safetensors", count=8, numel=1 * MiB, seed=0):
    """count float32 tensors of numel elements each (4 MiB by default), all different."""
    tensors = {f"c{i:02d}": torch.arange(numel, dtype=torch.float32) * (i + 1) + seed for i in range(count)}
    path = tmp_path / name
    spt.save_file(tensors, str(path))
    return path, tensors


def _in_thread(fn):
    """Runs fn() in a thread; fails (instead of hanging the suite) when it does not return."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # reported by the caller
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG)
    assert not t.is_alive(), f"still running after {HANG} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


# --- errors -------------------------------------------------------------------

def test_closed_handle_raises(small):
    path, _ = small
    f = ringsafe.safe_open(str(path), framework="pt")
    assert "model.embed" in f.keys()
    f.close()
    calls = (f.keys, f.offset_keys, f.metadata, f.get_tensors,
             lambda: f.get_tensor("model.embed"),
             lambda: f.get_slice("model.embed"),
             lambda: f.read_into({"model.embed": torch.empty(10, 100, dtype=torch.int64)}))
    for call in calls:
        with pytest.raises(ringsafe.SafetensorError, match="File is closed"):
            call()
    # leaving the with-block closes it too
    with ringsafe.safe_open(str(path), framework="np") as g:
        assert g.get_tensor("model.embed").shape == (10, 100)
    with pytest.raises(ringsafe.SafetensorError, match="File is closed"):
        g.get_tensor("model.embed")
    with pytest.raises(ringsafe.SafetensorError, match="File is closed"):
        g.keys()


@pytest.mark.parametrize("framework", ["tf", "xx", "flax", ""])
def test_unknown_framework(small, framework):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework=framework)


@pytest.mark.parametrize("framework,device", [("np", "cuda"), ("numpy", "cuda:0"), ("pt", "foo"),
                                              ("torch", "not-a-device:7")])
def test_bad_device_safe_open(small, framework, device):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework=framework, device=device)


def test_bad_device_load_file(small):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError):
        rpt.load_file(str(path), device="foo")
    with pytest.raises(ringsafe.SafetensorError):
        rnp.load_file(str(path), device="cuda")
    with pytest.raises(ringsafe.SafetensorError):
        list(rpt.iter_tensors(str(path), device="foo"))


def test_missing_file_names_path(tmp_path):
    missing = tmp_path / "nope" / "absent.safetensors"
    pattern = re.escape(str(missing))
    for call in (lambda: rpt.load_file(str(missing)),
                 lambda: rnp.load_file(str(missing)),
                 lambda: ringsafe.safe_open(str(missing), framework="pt"),
                 lambda: rpt.read_into(str(missing), {"x": torch.empty(1)}),
                 lambda: list(rpt.iter_tensors(str(missing)))):
        with pytest.raises(FileNotFoundError, match=pattern) as info:
            call()
        # As open() would raise it: the errno, the engine's message, the path.
        assert info.value.errno == errno.ENOENT
        assert str(missing) in info.value.strerror
        assert info.value.filename == str(missing)


def test_other_os_errors(tmp_path, small):
    path, _ = small
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))) as info:
        rpt.load_file(str(tmp_path))
    assert info.value.errno == errno.EISDIR and info.value.filename == str(tmp_path)
    target = tmp_path / "no-such-dir" / "x.safetensors"
    with pytest.raises(FileNotFoundError, match=re.escape(str(target.parent))) as info:
        rpt.save_file({"a": torch.ones(2)}, str(target))
    assert info.value.filename == str(target.parent)  # the directory that is not there
    with pytest.raises(FileNotFoundError, match=re.escape(str(target.parent))) as info:
        ringsafe.Writer(str(target))
    assert info.value.filename == str(target.parent)
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    with pytest.raises(ringsafe.SafetensorError, match=re.escape(str(empty))):
        rpt.load_file(str(empty))


def test_bad_arguments(small):
    path, _ = small
    with pytest.raises(TypeError):
        rpt.load_file(str(path), select=[1])
    with pytest.raises(ValueError):
        list(rpt.iter_tensors(str(path), memory_limit=0))
    with pytest.raises(TypeError):
        rpt.read_into(str(path), [torch.empty(1)])


def test_missing_tensor_kind(small):
    path, _ = small
    with ringsafe.safe_open(str(path), framework="pt") as f:
        with pytest.raises(ringsafe.SafetensorError) as e:
            f.get_tensor("not.there")
        assert e.value.kind == "TensorNotFound"
        assert "not.there" in str(e.value)
        with pytest.raises(ringsafe.SafetensorError) as e:
            f.get_slice("not.there")
        assert e.value.kind == "TensorNotFound"
        # the handle stays usable after the error
        assert _equal(f.get_tensor("model.embed"), _tensors()["model.embed"])
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.read_into(str(path), {"not.there": torch.empty(3)})
    assert e.value.kind == "TensorNotFound"


# --- select= ------------------------------------------------------------------

def test_select_names_and_globs(small):
    path, tensors = small
    got = rpt.load_file(str(path), select=["model.embed", "lm_head.bias"])
    assert sorted(got) == ["lm_head.bias", "model.embed"]
    for k, v in got.items():
        assert _equal(v, tensors[k])
    # "*" crosses dots
    got = rpt.load_file(str(path), select="model.*.weight")
    assert sorted(got) == ["model.layers.0.attn.weight", "model.layers.0.mlp.weight",
                           "model.layers.1.attn.weight"]
    for k, v in got.items():
        assert _equal(v, tensors[k])
    got = rpt.load_file(str(path), select=["*attn*", "model.embed"])
    assert sorted(got) == ["model.embed", "model.layers.0.attn.weight", "model.layers.1.attn.weight"]
    # a glob matching nothing selects nothing
    assert rpt.load_file(str(path), select="zzz*") == {}
    got = rnp.load_file(str(path), select=["lm_head.*"])
    assert sorted(got) == ["lm_head.bias"]
    np.testing.assert_array_equal(got["lm_head.bias"], tensors["lm_head.bias"].numpy())
    names = [n for n, _ in rpt.iter_tensors(str(path), select="model.layers.*")]
    assert sorted(names) == ["model.layers.0.attn.weight", "model.layers.0.mlp.weight",
                             "model.layers.1.attn.weight"]


def test_select_on_safe_open(small):
    path, tensors = small
    with ringsafe.safe_open(str(path), framework="pt", select=["model.layers.?.attn.weight"]) as f:
        assert f.keys() == ["model.layers.0.attn.weight", "model.layers.1.attn.weight"]
        assert sorted(f.offset_keys()) == f.keys()
        assert sorted(f.get_tensors()) == f.keys()
        assert _equal(f.get_tensor("model.layers.1.attn.weight"), tensors["model.layers.1.attn.weight"])
        with pytest.raises(ringsafe.SafetensorError):
            f.get_tensor("model.embed")  # outside the selection
    with ringsafe.safe_open(str(path), framework="np", select=["scalar", "*.bias"]) as f:
        assert f.keys() == ["lm_head.bias", "scalar"]


def test_select_missing_exact_name_raises(small):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load_file(str(path), select=["model.embed", "missing.name"])
    assert e.value.kind == "TensorNotFound"
    assert "missing.name" in str(e.value)
    with pytest.raises(ringsafe.SafetensorError) as e:
        ringsafe.safe_open(str(path), framework="pt", select="missing.name")
    assert e.value.kind == "TensorNotFound"
    with pytest.raises(ringsafe.SafetensorError):
        list(rpt.iter_tensors(str(path), select=["missing.name"]))


# --- read_into ----------------------------------------------------------------

def test_read_into_torch_in_place(small):
    path, tensors = small
    dst = {k: torch.full_like(v, 3) for k, v in tensors.items()}
    ptrs = {k: v.data_ptr() for k, v in dst.items()}
    out = rpt.read_into(str(path), dst)
    assert out is dst
    for k, v in dst.items():
        assert v.data_ptr() == ptrs[k]
        assert _equal(v, tensors[k])
    # through safe_open too, a subset
    dst2 = {"model.embed": torch.zeros(10, 100, dtype=torch.int64)}
    p = dst2["model.embed"].data_ptr()
    with ringsafe.safe_open(str(path), framework="pt") as f:
        f.read_into(dst2)
    assert dst2["model.embed"].data_ptr() == p
    assert _equal(dst2["model.embed"], tensors["model.embed"])


def test_read_into_larger_tensors_in_place(tmp_path):
    # big enough for the engine's parallel path (several chunks per tensor)
    path, tensors = _chunky(tmp_path, count=4, numel=4 * MiB)
    dst = {k: torch.full_like(v, -1.0) for k, v in tensors.items()}
    ptrs = {k: v.data_ptr() for k, v in dst.items()}
    rpt.read_into(str(path), dst)
    for k, v in dst.items():
        assert v.data_ptr() == ptrs[k]
        assert _equal(v, tensors[k])


def test_read_into_numpy_in_place(small):
    path, tensors = small
    dst = {k: np.zeros(tuple(v.shape), dtype=v.numpy().dtype) for k, v in tensors.items()}
    ptrs = {k: v.ctypes.data for k, v in dst.items()}
    out = rnp.read_into(str(path), dst)
    assert out is dst
    for k, v in dst.items():
        assert v.ctypes.data == ptrs[k]
        assert v.dtype == tensors[k].numpy().dtype
        assert v.tobytes() == _bytes(tensors[k])


def _torch_refusal(bad):
    if bad == "dtype":
        return torch.full((64, 32), 9.0, dtype=torch.float64), ringsafe.SafetensorError
    if bad == "size":
        return torch.full((64, 31), 9.0), ringsafe.SafetensorError
    if bad == "bigger":
        return torch.full((64, 33), 9.0), ringsafe.SafetensorError
    return torch.full((32, 64), 9.0).t(), ValueError  # noncontig


@pytest.mark.parametrize("bad", ["dtype", "size", "bigger", "noncontig"])
def test_read_into_torch_refuses_before_io(small, bad):
    path, _ = small
    # good destinations before and after the bad one, each full of a sentinel
    dst = {
        "model.embed": torch.full((10, 100), -5, dtype=torch.int64),
        "model.layers.0.mlp.weight": torch.full((32, 16), 42.0),
    }
    dst["model.layers.1.attn.weight"], exc = _torch_refusal(bad)
    dst["lm_head.bias"] = torch.full((17,), 7.0, dtype=torch.float16)
    with pytest.raises(exc, match=re.escape("model.layers.1.attn.weight")):
        rpt.read_into(str(path), dst)
    assert torch.all(dst["model.embed"] == -5)
    assert torch.all(dst["model.layers.0.mlp.weight"] == 42.0)
    assert torch.all(dst["model.layers.1.attn.weight"] == 9.0)
    assert torch.all(dst["lm_head.bias"] == 7.0)


@pytest.mark.parametrize("bad", ["dtype", "size", "noncontig"])
def test_read_into_numpy_refuses_before_io(small, bad):
    path, _ = small
    dst = {"model.embed": np.full((10, 100), -5, dtype=np.int64)}
    if bad == "dtype":
        dst["model.layers.0.mlp.weight"], exc = np.full((32, 16), 9.0, dtype=np.float16), ringsafe.SafetensorError
    elif bad == "size":
        dst["model.layers.0.mlp.weight"], exc = np.full((32, 15), 9.0, dtype=np.float32), ringsafe.SafetensorError
    else:
        dst["model.layers.0.mlp.weight"], exc = np.full((32, 32), 9.0, dtype=np.float32)[:, ::2], ValueError
    dst["scalar"] = np.full((), 1.25, dtype=np.float64)
    with pytest.raises(exc, match=re.escape("model.layers.0.mlp.weight")):
        rnp.read_into(str(path), dst)
    assert np.all(dst["model.embed"] == -5)
    assert np.all(dst["model.layers.0.mlp.weight"] == 9.0)
    assert dst["scalar"] == 1.25


def test_read_into_numpy_refuses_read_only(small):
    path, tensors = small
    frozen = bytes(17 * 2)  # a fresh immutable object (not a shared constant)
    dst = {"lm_head.bias": np.frombuffer(frozen, dtype=np.float16)}
    assert not dst["lm_head.bias"].flags.writeable
    try:
        with pytest.raises(ValueError, match="lm_head.bias"):
            rnp.read_into(str(path), dst)
    finally:
        assert frozen == bytes(17 * 2), "an immutable bytes object was written to"


# --- iter_tensors -------------------------------------------------------------

def test_iter_tensors_data_order_and_values(small):
    path, tensors = small
    with ringsafe.safe_open(str(path), framework="pt") as f:
        order = f.offset_keys()
    seen = [(n, t.clone()) for n, t in rpt.iter_tensors(str(path), memory_limit=20000)]
    assert [n for n, _ in seen] == order
    assert sorted(order) == sorted(tensors)
    for n, t in seen:
        assert _equal(t, tensors[n])
    # NumPy too
    seen = [(n, a.copy()) for n, a in rnp.iter_tensors(str(path), memory_limit=20000)]
    assert [n for n, _ in seen] == order
    for n, a in seen:
        assert a.tobytes() == _bytes(tensors[n])


def test_iter_tensors_many_batches(tmp_path):
    # 8 x 4 MiB under a 9 MiB limit: one tensor per batch, reads running ahead
    path, tensors = _chunky(tmp_path)
    kept = {}
    for n, t in rpt.iter_tensors(str(path), memory_limit=9 * MiB):
        assert n not in kept
        kept[n] = t  # keeping a yielded tensor keeps its batch alive
    assert list(kept) == sorted(tensors)
    gc.collect()
    for n, t in kept.items():
        assert _equal(t, tensors[n])


def test_iter_tensors_tensor_over_limit_raises(tmp_path):
    path, _ = _chunky(tmp_path, count=2)
    with pytest.raises(ringsafe.SafetensorError, match="c00"):
        list(rpt.iter_tensors(str(path), memory_limit=1 * MiB))


def _open_fds(path):
    """How many of this process's file descriptors are open on ``path``."""
    target = os.path.realpath(path)
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            pass
    return n


@pytest.mark.parametrize("how", ["break", "close", "drop"])
def test_iter_tensors_stops_early(tmp_path, how):
    path, tensors = _chunky(tmp_path)
    other, other_tensors = _chunky(tmp_path, name="other.safetensors", seed=5)

    def consume():
        got = []
        gen = rpt.iter_tensors(str(path), memory_limit=9 * MiB)
        if how == "break":
            for n, t in gen:
                got.append((n, t.clone()))
                if len(got) == 2:
                    break
            gen.close()
        elif how == "close":
            got.append(tuple(next(gen)))
            assert _open_fds(path) >= 1  # the instrument: open while iterating
            gen.close()
            with pytest.raises(StopIteration):
                next(gen)
        else:
            got.append(tuple(next(gen)))
            del gen
            gc.collect()
        return got

    got = _in_thread(consume)  # a hang in the generator's cleanup fails here
    for n, t in got:
        assert _equal(t, tensors[n])
    assert _open_fds(path) == 0  # the stopped iterator closed its file
    # later reads, of other files and of the same one, still work
    loaded = _in_thread(lambda: rpt.load_file(str(other)))
    for k, v in other_tensors.items():
        assert _equal(loaded[k], v)
    again = _in_thread(lambda: [(n, t.clone()) for n, t in rpt.iter_tensors(str(path), memory_limit=9 * MiB)])
    assert [n for n, _ in again] == sorted(tensors)
    for n, t in again:
        assert _equal(t, tensors[n])


# --- progress -----------------------------------------------------------------

def _check_progress(calls, total_bytes):
    assert calls, "progress was never called"
    dones = [d for d, _ in calls]
    assert dones == sorted(dones), dones
    assert all(0 <= d <= t for d, t in calls if t), calls
    assert calls[-1] == (total_bytes, total_bytes), calls[-1]


def _get_tensors(path, cb):
    with ringsafe.safe_open(str(path), "pt") as f:
        return f.get_tensors(progress=cb)


def test_progress_callback(tmp_path):
    path, tensors = _chunky(tmp_path)
    total = _data_bytes(tensors)
    dst = {k: torch.empty_like(v) for k, v in tensors.items()}
    runs = {
        "load_file": lambda cb: rpt.load_file(str(path), progress=cb),
        "iter_tensors": lambda cb: [t.sum() for _, t in rpt.iter_tensors(str(path), memory_limit=9 * MiB,
                                                                          progress=cb)],
        "read_into": lambda cb: rpt.read_into(str(path), dst, progress=cb),
        "numpy.load_file": lambda cb: rnp.load_file(str(path), progress=cb),
        "save_file": lambda cb: rpt.save_file(tensors, str(tmp_path / "saved.safetensors"), progress=cb),
        "safe_open.get_tensors": lambda cb: _get_tensors(path, cb),
    }
    for what, run in runs.items():
        calls = []
        run(lambda done, total_: calls.append((done, total_)))
        try:
            _check_progress(calls, total)
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None
    for k, v in tensors.items():
        assert _equal(dst[k], v)


def test_progress_callback_error_propagates(tmp_path):
    path, tensors = _chunky(tmp_path)
    calls = []

    def cb(done, total):
        calls.append(done)
        if done:
            raise ZeroDivisionError("stop here")

    with pytest.raises(ZeroDivisionError, match="stop here"):
        rpt.load_file(str(path), progress=cb)
    with pytest.raises(ZeroDivisionError, match="stop here"):
        list(rpt.iter_tensors(str(path), memory_limit=9 * MiB, progress=cb))
    with pytest.raises(ZeroDivisionError, match="stop here"):
        rpt.read_into(str(path), {k: torch.empty_like(v) for k, v in tensors.items()}, progress=cb)
    got = rpt.load_file(str(path))
    for k, v in tensors.items():
        assert _equal(got[k], v)


def test_progress_callback_error_during_save(tmp_path):
    # The callback raises at its first report of a write still running; when
    # the save raises, nothing may be at the path (nor any temporary).
    tensors = {f"s{i}": torch.full((4 * MiB,), float(i)) for i in range(16)}  # 256 MiB
    out = tmp_path / "out"
    out.mkdir()
    raised = 0
    for attempt in range(3):
        path = out / f"saved{attempt}.safetensors"

        def cb(done, total):
            if 0 < done < total:
                raise ZeroDivisionError("stop here")

        try:
            rpt.save_file(tensors, str(path), progress=cb, sync=True)
        except ZeroDivisionError:
            raised += 1
            assert not path.exists()
        else:  # the write went from nothing to everything between two reports
            assert rpt.load_file(str(path)).keys() == tensors.keys()
            path.unlink()
        assert os.listdir(out) == []
    if not raised:
        pytest.skip("no progress report came while the writes were running")


def test_progress_callback_error_at_the_end_of_save(tmp_path):
    path = tmp_path / "x.safetensors"
    spt.save_file({"old": torch.arange(3)}, str(path))
    before = path.read_bytes()
    tensors = {f"s{i}": torch.full((MiB,), float(i)) for i in range(4)}

    def cb(done, total):
        if done == total:
            raise ZeroDivisionError("stop at the end")

    with pytest.raises(ZeroDivisionError):
        rpt.save_file(tensors, str(path), progress=cb)
    # save_file raised: the caller must still find the old file
    assert path.read_bytes() == before


def test_progress_rejects_non_callable(small):
    path, _ = small
    with pytest.raises(TypeError):
        rpt.load_file(str(path), progress="yes")


def test_progress_true_draws_tqdm(tmp_path, capsys):
    pytest.importorskip("tqdm")
    path, tensors = _chunky(tmp_path)
    capsys.readouterr()
    got = rpt.load_file(str(path), progress=True)
    err = capsys.readouterr().err
    assert "100%" in err and "32.0M" in err, err
    for k, v in tensors.items():
        assert _equal(got[k], v)
    rpt.save_file(tensors, str(tmp_path / "saved.safetensors"), progress=True)
    err = capsys.readouterr().err
    assert "100%" in err and "32.0M" in err, err
    assert rpt.load_file(str(tmp_path / "saved.safetensors")).keys() == tensors.keys()
    n = sum(1 for _ in rpt.iter_tensors(str(path), memory_limit=9 * MiB, progress=True))
    assert n == len(tensors)
    err = capsys.readouterr().err
    assert "100%" in err and "32.0M" in err, err


# --- lifetimes ----------------------------------------------------------------

def test_views_keep_memory_alive(tmp_path):
    path, tensors = _chunky(tmp_path)
    loaded = rpt.load_file(str(path))
    keep = loaded["c03"]
    part = loaded["c05"][1000:2000]  # a view of a view
    keep_np = rnp.load_file(str(path))["c06"]
    with ringsafe.safe_open(str(path), "pt") as f:
        from_handle = f.get_tensor("c07")
    del loaded
    gc.collect()
    # churn the allocator so that freed memory would be reused
    junk = [torch.full((MiB,), 7.0) for _ in range(64)]
    del junk
    gc.collect()
    assert _equal(keep, tensors["c03"])
    assert _equal(part, tensors["c05"][1000:2000])
    assert keep_np.tobytes() == _bytes(tensors["c06"])
    assert _equal(from_handle, tensors["c07"])


# --- GIL and threads ----------------------------------------------------------

class _Counter:
    """A thread that counts, taking the GIL for each step and handing it back
    after it (time.sleep(0) releases the GIL). While it runs, the switch interval
    is far longer than the test, so the interpreter never takes the GIL away from
    the main thread on its own: the counter advances only while the main thread
    has released the GIL."""

    def __init__(self):
        self.n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.n += 1
            time.sleep(0)

    def __enter__(self):
        self._thread.start()
        while self.n == 0:
            time.sleep(0.001)
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(1e4)
        return self

    def __exit__(self, *exc):
        sys.setswitchinterval(self._interval)
        self._stop.set()
        self._thread.join()


def test_counter_sees_a_call_that_holds_the_gil():
    # the method's control: a C call that keeps the GIL throughout leaves the
    # counter where it was; one that releases it (a sleep) does not
    with _Counter() as c:
        before = c.n
        data = b"x" * (256 * MiB)
        held = c.n - before
        before = c.n
        time.sleep(0.05)
        released = c.n - before
    del data
    assert held == 0
    assert released > 0


@pytest.fixture(scope="module")
def big_tensors():
    numel = BIG // 4 // 8
    return {f"b{i}": torch.arange(numel, dtype=torch.int32) + i for i in range(8)}


def _window(run):
    """Counter increments between the first and the last progress callback of
    run(cb): during that window the main thread is inside the engine, apart from
    the callbacks themselves (which never release the GIL). Also returns the
    increments over the whole call, and run's result."""
    marks = []
    with _Counter() as c:
        start = c.n
        result = run(lambda done, total: marks.append(c.n))
        whole = c.n - start
    assert len(marks) >= 2, marks
    return marks[-1] - marks[0], whole, result


@pytest.fixture(scope="module")
def big_saved(tmp_path_factory, big_tensors):
    """The big file, written by save_file under the counter: (path, inside, whole)."""
    path = tmp_path_factory.mktemp("gil") / "big.safetensors"
    inside, whole, _ = _window(lambda cb: rpt.save_file(big_tensors, str(path), progress=cb))
    yield path, inside, whole
    path.unlink(missing_ok=True)


def test_gil_released_during_save_file(big_saved, big_tensors):
    path, inside, whole = big_saved
    assert inside > 0
    assert whole > 0
    with ringsafe.safe_open(str(path), "pt") as f:
        assert f.keys() == sorted(big_tensors)
        assert torch.equal(f.get_tensor("b7"), big_tensors["b7"])


@pytest.mark.parametrize("backend", ["pread", "mmap"])
def test_gil_released_during_load_file(big_saved, big_tensors, backend):
    path, _, _ = big_saved
    if backend == "mmap":
        evict(path)  # a cached file is mapped within one progress interval: give it reads to wait for
    inside, whole, got = _window(lambda cb: rpt.load_file(str(path), progress=cb, backend=backend))
    assert inside > 0
    for k, v in big_tensors.items():
        assert torch.equal(got[k], v)
    del got
    # without a progress callback
    if backend == "mmap":
        evict(path)
    with _Counter() as c:
        before = c.n
        got = rpt.load_file(str(path), backend=backend)
        assert c.n - before > 0
    del got


def test_gil_released_during_read_into(big_saved, big_tensors):
    path, _, _ = big_saved
    dst = {k: torch.empty_like(v) for k, v in big_tensors.items()}
    inside, _, _ = _window(lambda cb: rpt.read_into(str(path), dst, progress=cb))
    assert inside > 0
    for k, v in big_tensors.items():
        assert torch.equal(dst[k], v)


def test_concurrent_loads(tmp_path):
    files = [_chunky(tmp_path, name=f"f{j}.safetensors", seed=j) for j in range(2)]
    threads_n, rounds = 4, 3
    barrier = threading.Barrier(threads_n)
    results, errors = [], []

    def work(j):
        try:
            path, _ = files[j % len(files)]
            barrier.wait()
            for r in range(rounds):
                if r == 0:
                    got = rpt.load_file(str(path))
                elif r == 1:
                    got = {n: t.clone() for n, t in rpt.iter_tensors(str(path), memory_limit=9 * MiB)}
                else:
                    with ringsafe.safe_open(str(path), "pt") as f:
                        got = {n: f.get_tensor(n) for n in f.keys()}
                results.append((j % len(files), got))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG)
        assert not t.is_alive()
    assert not errors, errors
    assert len(results) == threads_n * rounds
    for j, got in results:
        tensors = files[j][1]
        assert sorted(got) == sorted(tensors)
        for k, v in tensors.items():
            assert _equal(got[k], v)

"""ringsafe's Python-side behaviours beyond format conformance: errors for
closed handles, bad frameworks and devices, select=, read_into in place,
the streaming iterator, progress, view lifetimes, the GIL released during
reads and writes, concurrent loads."""

import gc
import pathlib
import sys
import threading

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch


def _tensors():
    g = torch.Generator().manual_seed(7)
    return {
        "model.layers.0.attn.weight": torch.randn(64, 32, generator=g),
        "model.layers.0.mlp.weight": torch.randn(32, 16, generator=g),
        "model.layers.1.attn.weight": torch.randn(64, 32, generator=g),
        "model.embed": torch.arange(1000, dtype=torch.int64).reshape(10, 100),
        "lm_head.bias": torch.randn(17, generator=g).to(torch.float16),
    }


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.safetensors"
    tensors = _tensors()
    spt.save_file(tensors, str(path), metadata={"k": "v"})
    return path, tensors


def _equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


# --- errors -------------------------------------------------------------------

def test_closed_handle_raises(small):
    path, _ = small
    f = ringsafe.safe_open(str(path), framework="pt")
    f.close()
    for call in (f.keys, f.metadata, lambda: f.get_tensor("model.embed"), f.get_tensors):
        with pytest.raises(ringsafe.SafetensorError, match="File is closed"):
            call()
    with ringsafe.safe_open(str(path), framework="pt") as g:
        pass
    with pytest.raises(ringsafe.SafetensorError, match="File is closed"):
        g.get_tensor("model.embed")


@pytest.mark.parametrize("framework", ["tf", "xx"])
def test_unknown_framework(small, framework):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework=framework)


def test_bad_devices(small):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework="np", device="cuda")
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework="pt", device="foo")
    with pytest.raises(ringsafe.SafetensorError):
        rpt.load_file(str(path), device="foo")
    with pytest.raises(ringsafe.SafetensorError):
        rnp.load_file(str(path), device="cuda")


def test_missing_file_names_path(tmp_path):
    missing = tmp_path / "nope" / "absent.safetensors"
    with pytest.raises(FileNotFoundError, match="absent.safetensors"):
        rpt.load_file(str(missing))
    with pytest.raises(FileNotFoundError, match="absent.safetensors"):
        ringsafe.safe_open(str(missing), framework="pt")


def test_missing_tensor_kind(small):
    path, _ = small
    with ringsafe.safe_open(str(path), framework="pt") as f:
        with pytest.raises(ringsafe.SafetensorError) as e:
            f.get_tensor("not.there")
    assert e.value.kind == "TensorNotFound"
    assert "not.there" in str(e.value)


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
    with ringsafe.safe_open(str(path), framework="pt", select=["model.layers.?.attn.weight"]) as f:
        assert f.keys() == ["model.layers.0.attn.weight", "model.layers.1.attn.weight"]
        with pytest.raises(ringsafe.SafetensorError):
            f.get_tensor("model.embed")  # outside the selection


def test_select_missing_exact_name_raises(small):
    path, _ = small
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load_file(str(path), select=["model.embed", "missing.name"])
    assert e.value.kind == "TensorNotFound"
    with pytest.raises(ringsafe.SafetensorError):
        ringsafe.safe_open(str(path), framework="pt", select="missing.name")


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
    # through safe_open too
    dst2 = {"model.embed": torch.zeros(10, 100, dtype=torch.int64)}
    p = dst2["model.embed"].data_ptr()
    with ringsafe.safe_open(str(path), framework="pt") as f:
        f.read_into(dst2)
    assert dst2["model.embed"].data_ptr() == p
    assert _equal(dst2["model.embed"], tensors["model.embed"])


def test_read_into_numpy_in_place(small):
    path, tensors = small
    dst = {k: np.zeros(tuple(v.shape), dtype=v.numpy().dtype) for k, v in tensors.items()}
    ptrs = {k: v.ctypes.data for k, v in dst.items()}
    rnp.read_into(str(path), dst)
    for k, v in dst.items():
        assert v.ctypes.data == ptrs[k]
        np.testing.assert_array_equal(v, tensors[k].numpy())
        assert v.dtype == tensors[k].numpy().dtype


def _sentinel_dsts():
    return {
        "model.embed": torch.full((10, 100), -5, dtype=torch.int64),
        "model.layers.0.mlp.weight": torch.full((32, 16), 42.0),
    }


@pytest.mark.parametrize("bad", ["dtype", "size", "noncontig"])
def test_read_into_refuses_before_io(small, bad):
    path, _ = small
    dst = _sentinel_dsts()
    if bad == "dtype":
        dst["model.layers.1.attn.weight"] = torch.full((64, 32), 9.0, dtype=torch.float64)
        exc = ringsafe.SafetensorError
    elif bad == "size":
        dst["model.layers.1.attn.weight"] = torch.full((64, 31), 9.0)
        exc = ringsafe.SafetensorError
    else:
        dst["model.layers.1.attn.weight"] = torch.full((32, 64), 9.0).t()
        exc = ValueError
    with pytest.raises(exc, match="model.layers.1.attn.weight"):
        rpt.read_into(str(path), dst)
    assert torch.all(dst["model.embed"] == -5)
    assert torch.all(dst["model.layers.0.mlp.weight"] == 42.0)
    assert torch.all(dst["model.layers.1.attn.weight"] == 9.0)


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


def test_iter_tensors_closed_early(small):
    path, tensors = small
    gen = rpt.iter_tensors(str(path), memory_limit=9000)
    name, t = next(gen)
    assert _equal(t, tensors[name])
    gen.close()
    with pytest.raises(StopIteration):
        next(gen)
    got = rpt.load_file(str(path))
    for k, v in tensors.items():
        assert _equal(got[k], v)
    again = dict((n, t.clone()) for n, t in rpt.iter_tensors(str(path)))
    assert sorted(again) == sorted(tensors)


# --- progress -----------------------------------------------------------------

def test_progress_callback(small):
    path, tensors = small
    total_bytes = sum(v.numel() * v.element_size() for v in tensors.values())
    for call in (lambda cb: rpt.load_file(str(path), progress=cb),
                 lambda cb: list(rpt.iter_tensors(str(path), memory_limit=9000, progress=cb))):
        calls = []
        call(lambda done, total: calls.append((done, total)))
        assert calls, "progress was never called"
        dones = [d for d, _ in calls]
        assert dones == sorted(dones)
        assert calls[-1][0] == calls[-1][1] == total_bytes


# --- lifetimes ----------------------------------------------------------------

def test_views_keep_memory_alive(small):
    path, tensors = small
    loaded = rpt.load_file(str(path))
    keep = loaded["model.embed"]
    keep_np = rnp.load_file(str(path))["lm_head.bias"]
    del loaded
    gc.collect()
    # churn the allocator so a freed arena would get reused
    junk = [torch.full((4096,), 7, dtype=torch.int64) for _ in range(64)]
    del junk
    gc.collect()
    assert _equal(keep, tensors["model.embed"])
    np.testing.assert_array_equal(keep_np, tensors["lm_head.bias"].numpy())


# --- GIL and threads ----------------------------------------------------------

class _Counter:
    def __init__(self):
        self.n = 0
        self.stop = threading.Event()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        self.started.set()
        while not self.stop.is_set():
            self.n += 1

    def __enter__(self):
        self.thread.start()
        self.started.wait()
        # With a long switch interval the interpreter does not preempt the
        # calling thread on its own during the call's short Python parts: the
        # counter advances only when the call releases the GIL.
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(0.5)
        return self

    def __exit__(self, *exc):
        sys.setswitchinterval(self.interval)
        self.stop.set()
        self.thread.join()


@pytest.fixture(scope="module")
def big_tensors():
    # ~512 MiB in 4 tensors
    return {f"t{i}": torch.full((32 << 20,), float(i + 1), dtype=torch.float32) for i in range(4)}


def test_gil_released_during_save_and_load(tmp_path, big_tensors):
    path = tmp_path / "big.safetensors"
    # Measure how far the counter gets during the calls: the counter thread
    # needs the GIL, so it advances only if the call releases it.
    with _Counter() as c:
        before = c.n
        rpt.save_file(big_tensors, str(path))
        during_save = c.n - before
    assert during_save > 0
    try:
        with _Counter() as c:
            before = c.n
            got = rpt.load_file(str(path))
            during_load = c.n - before
        assert during_load > 0
        for k, v in big_tensors.items():
            assert torch.equal(got[k], v)
        del got
    finally:
        path.unlink()


def test_concurrent_loads(small):
    path, tensors = small
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(rpt.load_file(str(path)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20
    for got in results:
        assert sorted(got) == sorted(tensors)
        for k, v in tensors.items():
            assert _equal(got[k], v)

"""GPU destinations from Python (ringsafe.lowlevel.read_to_device_at) through the
host stand-in: bytes exact for several dtypes, a tensor many staging buffers
long, cancellation, an injected copy failure naming the tensor, the order of
the stream wait, the copies and the final event against the caller's stream,
load_model filling parameters where they are; the real CUDA
path only where torch sees a GPU (skipped otherwise), and the clear error of a
device read on a machine without one."""

import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
from ringsafe import _ringsafe
from ringsafe.lowlevel import MemorySpan
import safetensors.numpy as snp


def arrays():
    rng = np.random.default_rng(25)
    return {
        "f16": rng.standard_normal((37, 11)).astype(np.float16),
        "f32": rng.standard_normal((300, 7)).astype(np.float32),
        "f64": rng.standard_normal((5, 3, 2)).astype(np.float64),
        "i8": rng.integers(-128, 127, (999,), dtype=np.int8),
        "u8": rng.integers(0, 255, (4097,), dtype=np.uint8),
        "i32": rng.integers(-(2**31), 2**31 - 1, (64, 65), dtype=np.int32),
        "i64": rng.integers(-(2**62), 2**62, (130,), dtype=np.int64),
        "bool": rng.integers(0, 2, (77,)).astype(np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
    }


@pytest.fixture
def checkpoint(tmp_path):
    data = arrays()
    path = tmp_path / "m.safetensors"
    snp.save_file(data, str(path))
    return str(path), data


def destinations(data, names):
    """Host arrays playing device memory for the stand-in, one per tensor."""
    out = {n: np.zeros(data[n].nbytes, dtype=np.uint8) for n in names}
    return out, [(out[n].ctypes.data, out[n].nbytes) for n in names]


def device_read(path, names, dsts, **kw):
    """read_to_device_at on a Reader of ``path``: its stats."""
    r = _ringsafe.Reader(str(path))
    try:
        return _ringsafe.read_to_device_at(r, names, dsts, **kw)
    finally:
        r.close()


def hooked_read(path, names, dsts, **kw):
    """The stand-in's read with its test hooks (fail_copy_at, cancel_at_copy, the trace)."""
    r = _ringsafe.Reader(str(path))
    try:
        return _ringsafe._stand_in_read_with_hooks(r, names, dsts, **kw)
    finally:
        r.close()


def test_several_dtypes_bytes_exact(checkpoint):
    path, data = checkpoint
    names = list(data)
    out, dsts = destinations(data, names)
    stats = device_read(path, names, dsts, stand_in=True, staging_size=4096, staging_count=2)
    for n in names:
        assert out[n].tobytes() == data[n].tobytes(), n
    assert stats["staged_bytes"] == sum(a.nbytes for a in data.values())
    assert stats["direct_bytes"] == 0


def test_a_tensor_larger_than_one_staging_buffer(tmp_path):
    big = np.arange(300_001, dtype=np.float32)
    path = tmp_path / "big.safetensors"
    snp.save_file({"big": big}, str(path))
    out, dsts = destinations({"big": big}, ["big"])
    stats = device_read(str(path), ["big"], dsts, stand_in=True, staging_size=64 << 10, staging_count=3)
    assert out["big"].tobytes() == big.tobytes()
    assert stats["batches"] == (big.nbytes + (64 << 10) - 1) // (64 << 10)
    assert stats["copies"] == stats["batches"]


def test_cancellation_mid_load(tmp_path):
    big = np.arange(100_000, dtype=np.int64)
    path = tmp_path / "big.safetensors"
    snp.save_file({"big": big}, str(path))
    out, dsts = destinations({"big": big}, ["big"])
    with pytest.raises(ringsafe.SafetensorError) as e:
        hooked_read(path, ["big"], dsts, staging_size=4096, staging_count=2, cancel_at_copy=3)
    assert e.value.kind == "Cancelled"
    assert out["big"][: 3 * 4096].tobytes() == big.view(np.uint8)[: 3 * 4096].tobytes()
    assert big.view(np.uint8)[-4096:].any() and not out["big"][-4096:].any()  # the end never landed


def test_an_injected_copy_error_names_the_tensor(checkpoint):
    path, data = checkpoint
    names = ["u8", "i32"]  # u8: copies 0 and 1 (4096 + 1 bytes); i32 from copy 2
    out, dsts = destinations(data, names)
    with pytest.raises(ringsafe.SafetensorError) as e:
        hooked_read(path, names, dsts, staging_size=4096, staging_count=2, fail_copy_at=3)
    assert e.value.kind == "IoError"
    assert "'i32'" in str(e.value)
    assert "injected copy failure" in str(e.value)


def test_bad_destinations_are_refused_before_any_copy(checkpoint):
    path, data = checkpoint
    out, dsts = destinations(data, ["f32"])
    with pytest.raises(ringsafe.SafetensorError) as e:
        device_read(path, ["f32"], [(dsts[0][0], dsts[0][1] - 1)], stand_in=True)
    assert e.value.kind == "BufferTooSmall"
    assert "'f32'" in str(e.value)
    assert not out["f32"].any()


def test_device_reads_take_memory_span_records_and_still_tuples(checkpoint):
    path, data = checkpoint
    names = ["f32", "i8", "u8"]
    out, dsts = destinations(data, names)
    # Records read by name; the (address, size) tuples of before are also accepted, in one call.
    spans = [MemorySpan(*dsts[0]), MemorySpan(address=dsts[1][0], size=dsts[1][1]), dsts[2]]
    stats = device_read(path, names, spans, stand_in=True, staging_size=4096, staging_count=2)
    assert stats["staged_bytes"] == sum(data[n].nbytes for n in names)
    assert all(out[n].tobytes() == data[n].tobytes() for n in names)
    out, dsts = destinations(data, names)
    stats = hooked_read(path, names, tuple(MemorySpan(*d) for d in dsts))
    assert all(out[n].tobytes() == data[n].tobytes() for n in names) and "copy 0" in stats["trace"]


def test_device_reads_refuse_destinations_of_another_shape_before_any_copy(checkpoint):
    from ringsafe._described import FileRange
    path, data = checkpoint
    out, dsts = destinations(data, ["f32", "i8"])
    good = MemorySpan(*dsts[0])
    expected = r"takes MemorySpan records or \(address, size\) tuples"
    with pytest.raises(TypeError, match="read_to_device_at " + expected + ", not FileRange$"):
        device_read(path, ["f32", "i8"], [good, FileRange(*dsts[1])], stand_in=True)
    with pytest.raises(TypeError, match="_stand_in_read_with_hooks " + expected + ", not int$"):
        hooked_read(path, ["f32", "i8"], [good, dsts[1][0]])
    with pytest.raises(ringsafe.SafetensorError, match="read_to_device_at " + expected + "; got a tuple of 3"):
        device_read(path, ["f32", "i8"], [good, (*dsts[1], 0)], stand_in=True)
    with pytest.raises(TypeError, match="size must be an int, not float"):
        device_read(path, ["f32", "i8"], [good, MemorySpan(dsts[1][0], float(dsts[1][1]))], stand_in=True)
    assert not out["f32"].any() and not out["i8"].any()


def cuda_device():
    torch = pytest.importorskip("torch")
    return torch if torch.cuda.is_available() else None


def test_without_a_gpu_a_device_read_fails_clearly(checkpoint):
    if cuda_device() is not None:
        pytest.skip("a GPU is present: test_to_cuda_memory covers it")
    path, data = checkpoint
    cuda = _ringsafe.cuda_runtime_available()
    assert cuda.available or "CUDA runtime is not available" in cuda.reason
    out, dsts = destinations(data, ["f32"])
    with pytest.raises(ringsafe.SafetensorError) as e:
        device_read(path, ["f32"], dsts)
    # No runtime: InvalidArgument naming it; a runtime without a GPU: CUDA's own error text.
    assert e.value.kind in ("InvalidArgument", "IoError")
    assert "GPU destination" in str(e.value)
    assert not out["f32"].any()


def test_to_cuda_memory(checkpoint):
    torch = cuda_device()
    if torch is None:
        pytest.skip("torch sees no CUDA device")
    path, data = checkpoint
    names = list(data)
    dev = {n: torch.empty(data[n].nbytes, dtype=torch.uint8, device="cuda") for n in names}
    dsts = [(dev[n].data_ptr(), data[n].nbytes) for n in names]
    stats = device_read(path, names, dsts, staging_size=4096, staging_count=3)
    torch.cuda.synchronize()
    for n in names:
        assert dev[n].cpu().numpy().tobytes() == data[n].tobytes(), n
    assert stats["staged_bytes"] == sum(a.nbytes for a in data.values())


# device="cuda:N" through the loaders, with the stand-in (RINGSAFE_DEVICE_STAND_IN=1:
# CPU tensors play the device, the engine's staging pipeline runs for real).

@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setenv("RINGSAFE_DEVICE_STAND_IN", "1")
    return pytest.importorskip("torch")


def _torch_checkpoint(torch, tmp_path):
    import safetensors.torch as spt
    g = torch.Generator().manual_seed(25)
    data = {
        "embed.weight": torch.randn(300, 70, generator=g),
        "layers.0.w": torch.randn(64, 33, generator=g).to(torch.bfloat16),
        "layers.0.b": torch.randn(33, generator=g).to(torch.float16),
        "steps": torch.arange(11, dtype=torch.int64),
        "mask": torch.rand(17, generator=g) > 0.5,
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(2.5),
    }
    path = tmp_path / "t.safetensors"
    spt.save_file(data, str(path))
    return str(path), data


def test_load_file_to_a_device_goes_through_the_staging_pipeline(stand_in, tmp_path, monkeypatch):
    torch = stand_in
    import ringsafe.torch as rpt
    path, data = _torch_checkpoint(torch, tmp_path)
    calls = _recording(monkeypatch)
    seen = []
    out = rpt.load_file(path, device="cuda:0", progress=lambda done, total: seen.append((done, total)))
    assert list(out) == sorted(data)
    for k, v in data.items():
        assert out[k].dtype == v.dtype and out[k].shape == v.shape and torch.equal(out[k], v), k
    (args, kwargs), = calls
    assert kwargs["stand_in"] and kwargs["device"] == 0 and kwargs["stream"] == 0
    assert "empty" not in args[0]  # zero-byte tensors need no copy
    # The destinations cross into the extension as records, not positional tuples.
    assert [type(d) for d in args[1]] == [MemorySpan] * len(args[0])
    assert [d.size for d in args[1]] == [data[n].numel() * data[n].element_size() for n in args[0]]
    total = sum(v.numel() * v.element_size() for v in data.values())
    assert seen and seen[-1] == (total, total)
    sub = rpt.load_file(path, device=1, select="layers.*")
    assert sorted(sub) == ["layers.0.b", "layers.0.w"]
    assert torch.equal(sub["layers.0.w"], data["layers.0.w"])


def test_iter_tensors_and_load_model_to_a_device(stand_in, tmp_path):
    torch = stand_in
    import ringsafe.torch as rpt
    path, data = _torch_checkpoint(torch, tmp_path)
    got = dict(rpt.iter_tensors(path, device="cuda:0", memory_limit=128 << 10))
    assert sorted(got) == sorted(data)
    for k, v in data.items():
        assert torch.equal(got[k], v), k

    model = torch.nn.Sequential(torch.nn.Linear(70, 300), torch.nn.Linear(300, 5).to(torch.float16))
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    state["1.weight"] = state["1.weight"].t().contiguous().t()  # any layout in the file is fine
    import safetensors.torch as spt
    spt.save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "m.safetensors"))
    before = {k: v.data_ptr() for k, v in model.state_dict().items()}
    assert rpt.load_model(model, str(tmp_path / "m.safetensors"), device="cuda:0") == (set(), [])
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k
        assert v.data_ptr() == before[k]  # filled in place, not replaced


def test_a_device_load_reports_a_missing_tensor_and_a_bad_file(stand_in, tmp_path):
    import ringsafe.torch as rpt
    path, _ = _torch_checkpoint(stand_in, tmp_path)
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load_file(path, device="cuda:0", select=["nope"])
    assert e.value.kind == "TensorNotFound"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(pathlib.Path(path).read_bytes()[:-3])
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load_file(str(bad), device="cuda:0")
    assert e.value.kind == "MetadataIncompleteBuffer"


def _recording(monkeypatch):
    """The calls the loaders make to the engine's device read (ringsafe.lowlevel.read_to_device_at)."""
    calls = []
    real = _ringsafe.read_to_device_at
    monkeypatch.setattr(_ringsafe, "read_to_device_at",
                        lambda reader, *a, **k: calls.append((a, k)) or real(reader, *a, **k))
    return calls


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_safe_open_on_a_device_reads_through_one_staging_ring(stand_in, tmp_path, monkeypatch, backend):
    torch = stand_in
    path, data = _torch_checkpoint(torch, tmp_path)
    calls = _recording(monkeypatch)
    with ringsafe.safe_open(path, "pt", device="cuda:0", backend=backend) as f:
        for k in f.keys():
            got = f.get_tensor(k)
            assert got.dtype == data[k].dtype and got.shape == data[k].shape and torch.equal(got, data[k]), k
        both = f.get_tensors()
        assert list(both) == sorted(data)
        assert all(torch.equal(both[k], data[k]) for k in data)
        stagers = {id(kw["stager"]) for _, kw in calls}
        stager = calls[0][1]["stager"]
        assert stager.staging_buffers > 0  # the engine read through it, and kept it
    # One engine read per non-empty get_tensor, one for get_tensors, all through one ring.
    assert len(calls) == len(data) + 1
    assert len(stagers) == 1 and stager is not None and stager.stand_in and stager.device == 0
    assert stager.staging_buffers == 0  # close() freed the ring


def test_iter_tensors_on_a_device_keeps_one_ring_for_every_batch(stand_in, tmp_path, monkeypatch):
    torch = stand_in
    import ringsafe.torch as rpt
    path, data = _torch_checkpoint(torch, tmp_path)
    calls = _recording(monkeypatch)
    got = {}
    for k, v in rpt.iter_tensors(path, device="cuda:0", memory_limit=96 << 10):
        got[k] = v
        assert calls[-1][1]["stager"].staging_buffers > 0  # in use while the stream runs
    assert all(torch.equal(got[k], data[k]) for k in data)
    assert len(calls) > 2
    assert len({id(kw["stager"]) for _, kw in calls}) == 1
    assert calls[0][1]["stager"].staging_buffers == 0  # freed when the stream ended


def test_a_device_stager_checks_its_options():
    with pytest.raises(ringsafe.SafetensorError) as e:
        _ringsafe.DeviceStager(staging_count=1, stand_in=True)
    assert e.value.kind == "InvalidArgument" and "staging_count" in str(e.value)
    s = _ringsafe.DeviceStager(stand_in=True)
    assert s.staging_buffers == 0
    s.close()


def test_a_stager_for_another_device_is_refused(stand_in, tmp_path):
    torch = stand_in
    path, data = _torch_checkpoint(torch, tmp_path)
    r = _ringsafe.Reader(path)
    dst = torch.empty_like(data["embed.weight"])
    with pytest.raises(ringsafe.SafetensorError) as e:
        _ringsafe.read_to_device_at(r, ["embed.weight"], [(dst.data_ptr(), dst.numel() * 4)], device=1,
                                    stand_in=True, stager=_ringsafe.DeviceStager(device=0, stand_in=True))
    assert e.value.kind == "InvalidArgument" and "stager" in str(e.value)
    with pytest.raises(ringsafe.SafetensorError):
        _ringsafe.read_to_device_at(r, ["embed.weight"], [(dst.data_ptr(), dst.numel() * 4)], device=0,
                                    stand_in=True, stager=_ringsafe.DeviceStager(device=0, stand_in=False))
    s = _ringsafe.DeviceStager(device=0, stand_in=True)
    _ringsafe.read_to_device_at(r, ["embed.weight"], [(dst.data_ptr(), dst.numel() * 4)], device=0, stand_in=True,
                                stager=s)
    assert torch.equal(dst, data["embed.weight"])
    r.close()


def test_copies_wait_for_the_callers_stream_and_the_stream_for_the_copies(tmp_path):
    # The host stand-in takes the steps the CUDA copier queues, in order: the
    # copier's stream waits on an event recorded on the caller's stream
    # (PyTorch's current one) before its first copy, and the caller's stream
    # waits on the copies' event before the tensors are handed out. The staging
    # buffers are freed after the copier, which finishes what it queued.
    data = arrays()
    path = tmp_path / "m.safetensors"
    snp.save_file(data, str(path))
    names = list(data)
    out, dsts = destinations(data, names)
    stats = hooked_read(path, names, dsts, staging_size=4096, staging_count=2, stream=0x5EED)
    for n in names:
        assert out[n].tobytes() == data[n].tobytes(), n
    steps = stats["trace"]
    copies = [f"copy {i}" for i in range(stats["copies"])]
    assert steps == (["wait for stream 0x5eed"] + copies + ["record done", "stream 0x5eed waits for done",
                                                            "copier stopped"] + ["staging freed"] * 2)


def test_the_loaders_pass_the_current_stream(stand_in, tmp_path, monkeypatch):
    # With the stand-in there is no torch.cuda: the stream is the legacy default (0).
    # On a GPU it is torch.cuda.current_stream(index).cuda_stream (_device._stream).
    from ringsafe import _device
    torch = stand_in
    path, data = _torch_checkpoint(torch, tmp_path)
    calls = _recording(monkeypatch)
    with ringsafe.safe_open(path, "pt", device="cuda:0") as f:
        f.get_tensor("embed.weight")
    assert calls and all(kw["stream"] == _device._stream(0) == 0 for _, kw in calls)


def test_load_model_fills_parameters_where_they_are_and_does_not_move_the_model(tmp_path):
    # The reference's load_model copies into the parameters where they are
    # (load_state_dict); device= used to move the whole model with .to(device).
    torch = pytest.importorskip("torch")
    import ringsafe.torch as rpt
    import safetensors.torch as spt
    model = torch.nn.Linear(8, 4)
    want = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    spt.save_file(want, str(tmp_path / "m.safetensors"))
    before = {k: v.data_ptr() for k, v in model.state_dict().items()}
    for device in ("meta", "cuda:0"):  # neither is where the parameters are; no CUDA here (no stand-in)
        assert rpt.load_model(model, str(tmp_path / "m.safetensors"), device=device) == (set(), [])
        for k, v in model.state_dict().items():
            assert v.device.type == "cpu" and v.data_ptr() == before[k] and torch.equal(v, want[k]), (device, k)

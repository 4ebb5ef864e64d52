"""Memory safety at the Python boundary: buffers that are not C-contiguous are
refused before any byte is read (never read as if they were contiguous),
destinations of the public Reader are buffers whose bounds are checked (raw
addresses live in ringsafe.lowlevel), a StreamWriter used from two threads
runs one call at a time, options and names that cannot be converted raise
named errors, and paths are taken as the operating system takes them."""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from ringsafe import _ringsafe


@pytest.fixture
def blob():
    return spt.save({"a": torch.arange(6, dtype=torch.float32), "b": torch.ones(3, 2, dtype=torch.float16)})


@pytest.mark.parametrize("view", [lambda m: m[::-1], lambda m: m[::2],
                                  lambda m: memoryview(np.frombuffer(m, dtype=np.uint8).reshape(-1, 2)[:, :1])],
                         ids=["reversed", "every-other", "strided-2d"])
def test_strided_and_reversed_buffers_are_refused_before_any_byte_is_read(blob, view):
    # A reversed view's start pointer is its last byte: it used to be read as a
    # header length of 425201762369 bytes, from memory outside the view.
    v = view(memoryview(bytearray(blob)))
    with pytest.raises(TypeError, match="contiguous"):
        ringsafe.deserialize(v)
    for load in (rpt.load, rnp.load):
        with pytest.raises(TypeError, match="contiguous"):
            load(v)
    with pytest.raises(TypeError, match="C-contiguous"):
        _ringsafe.parse_bytes(v)  # the engine's own check, under the package's


def test_a_file_object_f4_box_is_refused_before_the_tensor_is_read(tmp_path):
    packed = torch.arange(32, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).reshape(4, 8)
    blob = spt.save({"q": packed})

    class Counting(io.BytesIO):
        reads = 0

        def readinto(self, b):
            Counting.reads += 1
            return super().readinto(b)

    f = Counting(blob)
    with ringsafe.safe_open(f, "pt") as h:
        before = Counting.reads
        with pytest.raises(ringsafe.SafetensorError, match="slicing F4 tensors of a file object"):
            h.get_slice("q")[1:3]
        assert Counting.reads == before  # nothing read for a slice that is refused
        assert torch.equal(h.get_tensor("q").view(torch.uint8), packed.view(torch.uint8))


def test_contiguous_views_of_any_layout_are_read_as_their_bytes(blob):
    want = ringsafe.deserialize(blob)
    for data in (bytearray(blob), memoryview(blob), memoryview(bytearray(blob))[0:len(blob)],
                 memoryview(blob + b"xx")[:len(blob)], memoryview(bytearray(blob)).cast("B", (len(blob) // 2, 2))):
        assert ringsafe.deserialize(data) == want
    assert ringsafe.deserialize(np.frombuffer(blob, dtype=np.uint8).data) == want


def _reader(tmp_path, tensors):
    path = tmp_path / "r.safetensors"
    spt.save_file(tensors, str(path))
    return ringsafe.Reader(str(path))


def test_the_public_reader_takes_buffers_and_checks_their_bounds(tmp_path):
    a = torch.arange(16, dtype=torch.float32)
    r = _reader(tmp_path, {"a": a})
    try:
        dst = bytearray(64)
        plan = r.plan_tensors(["a"], [dst])
        with pytest.raises(BufferError):
            dst.extend(b"x")  # the plan holds the export: the memory cannot move under a read
        r.execute(plan)
        assert torch.equal(torch.frombuffer(dst, dtype=torch.float32), a)
        del plan
        dst.extend(b"x")  # released with the plan
        arr = np.zeros(16, dtype=np.float32)
        r.execute(r.plan_tensors(["a"], [arr]))
        assert np.array_equal(arr, a.numpy())
        box = np.zeros(3, dtype=np.float32)
        r.execute(r.plan_requests([("a", [(2, 5)], box)]))
        assert np.array_equal(box, [2, 3, 4])
        guard = bytearray(b"\xa5" * 128)
        # Too small, strided, read-only, or a raw address: refused before any I/O.
        with pytest.raises(ringsafe.SafetensorError) as e:
            r.plan_tensors(["a"], [memoryview(guard)[:63]])
        assert e.value.kind == "BufferTooSmall"
        with pytest.raises(TypeError, match="C-contiguous"):
            r.plan_tensors(["a"], [memoryview(guard)[::2]])
        with pytest.raises(TypeError, match="read-only"):
            r.plan_tensors(["a"], [bytes(64)])
        with pytest.raises(TypeError, match="lowlevel"):
            r.plan_tensors(["a"], [(id(guard), 64)])
        with pytest.raises(TypeError, match="lowlevel"):
            r.plan_requests([("a", [(0, 4)], id(guard), 16)])
        assert guard == b"\xa5" * 128
    finally:
        r.close()


def test_the_reader_and_the_low_level_calls_take_records_and_still_tuples(tmp_path):
    import ringsafe.lowlevel
    from ringsafe.lowlevel import AddressedRequest, MemorySpan
    assert "TensorRequest" in ringsafe.__all__
    assert {"MemorySpan", "AddressedRequest"} <= set(ringsafe.lowlevel.__all__)
    a = torch.arange(16, dtype=torch.float32)
    r = _reader(tmp_path, {"a": a})
    try:
        box = np.zeros(3, dtype=np.float32)
        r.execute(r.plan_requests([ringsafe.TensorRequest("a", [(2, 5)], box)]))
        assert np.array_equal(box, [2, 3, 4])
        both = np.zeros(4, dtype=np.float32), np.zeros(2, dtype=np.float32)
        r.execute(r.plan_requests([ringsafe.TensorRequest(name="a", box=[(0, 4)], buffer=both[0]),
                                   ("a", [(14, 16)], both[1])]))  # the tuples of before are also accepted
        assert np.array_equal(both[0], [0, 1, 2, 3]) and np.array_equal(both[1], [14, 15])

        dst = torch.empty(16, dtype=torch.float32)
        r.execute(ringsafe.lowlevel.plan_tensors_at(r, ["a"], [MemorySpan(dst.data_ptr(), 64)], [dst]))
        assert torch.equal(dst, a)
        boxes = torch.zeros(3), torch.zeros(2)
        reqs = [AddressedRequest("a", [(5, 8)], boxes[0].data_ptr(), 12), ("a", [(0, 2)], boxes[1].data_ptr(), 8)]
        r.execute(ringsafe.lowlevel.plan_requests_at(r, reqs, list(boxes)))
        assert boxes[0].tolist() == [5, 6, 7] and boxes[1].tolist() == [0, 1]
    finally:
        r.close()


def test_records_of_another_shape_are_refused_before_any_byte_is_read(tmp_path):
    from ringsafe._described import FileRange
    from ringsafe.lowlevel import AddressedRequest, MemorySpan, plan_requests_at, plan_tensors_at
    r = _reader(tmp_path, {"a": torch.arange(16, dtype=torch.float32)})
    guard = bytearray(b"\xa5" * 64)
    where = np.frombuffer(guard, np.uint8).ctypes.data
    try:
        # A raw destination where a buffer is taken: pointed at ringsafe.lowlevel.
        with pytest.raises(TypeError, match="plan_tensors takes writable buffers.*lowlevel.plan_tensors_at"):
            r.plan_tensors(["a"], [MemorySpan(where, 64)])
        with pytest.raises(TypeError, match="TensorRequest records.*lowlevel.plan_requests_at"):
            r.plan_requests([AddressedRequest("a", [(0, 4)], where, 16)])
        with pytest.raises(TypeError, match=r"Reader.plan_requests takes TensorRequest records or "
                                            r"\(name, box, buffer\) tuples, not FileRange$"):
            r.plan_requests([FileRange(0, 16)])
        with pytest.raises(ringsafe.SafetensorError, match=r"\(name, box, buffer\) tuples; got a tuple of 2"):
            r.plan_requests([("a", [(0, 4)])])
        with pytest.raises(TypeError, match="tensor names must be str, not int"):
            r.plan_requests([ringsafe.TensorRequest(1, [(0, 4)], guard)])
        with pytest.raises(TypeError, match=r"plan_tensors_at takes MemorySpan records or \(address, size\) "
                                            r"tuples, not FileRange$"):
            plan_tensors_at(r, ["a"], [FileRange(where, 64)])
        with pytest.raises(TypeError, match="address must be an int, not str"):
            plan_tensors_at(r, ["a"], [MemorySpan(str(where), 64)])
        with pytest.raises(ringsafe.SafetensorError, match="size must not be negative"):
            plan_tensors_at(r, ["a"], [MemorySpan(where, -1)])
        with pytest.raises(ringsafe.SafetensorError, match=r"\(address, size\) tuples; got a tuple of 3"):
            plan_tensors_at(r, ["a"], [(where, 64, guard)])
        with pytest.raises(TypeError, match=r"plan_requests_at takes AddressedRequest records or "
                                            r"\(name, box, address, size\) tuples, not TensorRequest "
                                            r"\(it has no 'address', 'size'\)"):
            plan_requests_at(r, [ringsafe.TensorRequest("a", [(0, 4)], guard)])
        with pytest.raises(ringsafe.SafetensorError, match="a box is a list of"):
            plan_requests_at(r, [AddressedRequest("a", [(0, 4, 1)], where, 16)])
        assert guard == b"\xa5" * 64
    finally:
        r.close()


def test_the_loaders_hand_the_engine_records(tmp_path, monkeypatch):
    # No positional tuple crosses into the extension: every raw destination the package's loaders pass is a
    # MemorySpan or an AddressedRequest.
    from ringsafe import _engine_source, _load, _model
    from ringsafe.lowlevel import AddressedRequest, MemorySpan
    seen = []

    def record(module, name):
        real = getattr(module, name)

        def call(reader, *args, **kwargs):
            elements = args[0] if name == "plan_requests_at" else args[1]
            seen.extend((name, type(e)) for e in elements)
            return real(reader, *args, **kwargs)
        monkeypatch.setattr(module, name, call)
    for module in (_engine_source, _load, _model):
        record(module, "plan_tensors_at")
    record(_engine_source, "plan_requests_at")

    tensors = {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "bias": torch.ones(2)}
    path = str(tmp_path / "m.safetensors")
    spt.save_file(tensors, path)
    assert torch.equal(rpt.load_file(path, backend="pread")["weight"], tensors["weight"])
    with ringsafe.safe_open(path, "pt", backend="pread") as f:
        assert torch.equal(f.get_tensor("bias"), tensors["bias"])
        assert torch.equal(f.get_slice("weight")[1:], tensors["weight"][1:])
    dst = {k: torch.empty_like(v) for k, v in tensors.items()}
    rpt.read_into(path, dst)
    assert dict(rpt.iter_tensors(path, memory_limit=1 << 20)).keys() == tensors.keys()
    model = torch.nn.Linear(3, 2)
    rpt.load_model(model, path)
    assert torch.equal(model.weight.detach(), tensors["weight"])
    assert {n for n, _ in seen} == {"plan_tensors_at", "plan_requests_at"}
    assert all(kind is (AddressedRequest if n == "plan_requests_at" else MemorySpan) for n, kind in seen), seen


def test_raw_address_calls_live_in_the_low_level_namespace(tmp_path):
    import ringsafe.lowlevel
    for name in ringsafe.__all__:
        obj = getattr(ringsafe, name)
        assert not any(hasattr(obj, m) for m in ("plan_tensors_at", "plan_requests_at", "read_to_device_at")), name
    assert not hasattr(ringsafe.Reader, "read_to_device")
    assert "lowlevel" not in ringsafe.__all__
    a = torch.arange(8, dtype=torch.int64)
    r = _reader(tmp_path, {"a": a})
    try:
        dst = torch.empty(8, dtype=torch.int64)
        r.execute(ringsafe.lowlevel.plan_tensors_at(r, ["a"], [(dst.data_ptr(), 64)], [dst]))
        assert torch.equal(dst, a)
    finally:
        r.close()


_TWO_THREADS = """
import sys, threading
import numpy as np
from ringsafe import SafetensorError
from ringsafe._ringsafe import StreamWriter

path = sys.argv[1]
# Two threads adding at once: every add lands whole, none interleaved.
w = StreamWriter(path + ".both", sync=False)
data = {f"t{k}.{i}": np.full(1 << 18, k * 100 + i, dtype=np.float32) for k in range(2) for i in range(40)}

def adder(k):
    for i in range(40):
        a = data[f"t{k}.{i}"]
        w.add(f"t{k}.{i}", "F32", [a.size], a.ctypes.data, a.nbytes)

ts = [threading.Thread(target=adder, args=(k,)) for k in range(2)]
for t in ts: t.start()
for t in ts: t.join()
w.finish(None)
print("both", len(data))

# finish() on one thread while another adds: finish waits for the add in
# progress, and the adds after it are refused; the file holds exactly the
# tensors whose add returned.
w = StreamWriter(path, sync=False)
big = np.arange(1 << 22, dtype=np.float32)
added, started = [], threading.Event()

def keep_adding():
    i = 0
    while True:
        started.set()
        try:
            w.add(f"big.{i}", "F32", [big.size], big.ctypes.data, big.nbytes)
        except SafetensorError as e:
            print("refused", e.kind)
            return
        added.append(f"big.{i}")
        i += 1

t = threading.Thread(target=keep_adding)
t.start()
started.wait()
while len(added) < 2:
    pass
w.finish(None)
t.join()
print("added", len(added))
"""


def test_two_threads_on_one_writer_run_one_call_at_a_time(tmp_path):
    # In a child: a writer reset under a running add() was a use-after-free.
    script = tmp_path / "two_threads.py"
    script.write_text(_TWO_THREADS)
    path = tmp_path / "w.safetensors"
    out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "both 80" and lines[1] == "refused WriterState", out.stdout
    both = spt.load_file(str(path) + ".both")
    assert sorted(both) == sorted(f"t{k}.{i}" for k in range(2) for i in range(40))
    for name, t in both.items():
        k, i = (int(x) for x in name[1:].split("."))
        assert torch.all(t == k * 100 + i), name
    added = int(lines[2].split()[1])
    got = spt.load_file(str(path))
    assert sorted(got) == sorted(f"big.{i}" for i in range(added)) and added >= 2
    for t in got.values():
        assert torch.equal(t, torch.arange(1 << 22, dtype=torch.float32))


def test_writer_options_raise_named_errors(tmp_path):
    path = str(tmp_path / "o.safetensors")
    with pytest.raises(TypeError, match="writer option reserve_bytes must be an int, not str"):
        ringsafe.Writer(path, reserve_bytes="4096")
    with pytest.raises(ValueError, match="writer option reserve_bytes=-1 is out of range"):
        ringsafe.Writer(path, reserve_bytes=-1)
    with pytest.raises(TypeError, match="writer option sync must be a bool, not str"):
        ringsafe.Writer(path, sync="yes")
    with pytest.raises(TypeError, match="writer option expected_tensors must be an int, not float"):
        _ringsafe.StreamWriter(path, expected_tensors=2.5)
    with pytest.raises(TypeError, match="writer option direct must be a bool"):
        _ringsafe.StreamWriter(path, direct=1)
    w = _ringsafe.StreamWriter(path)
    with pytest.raises(TypeError, match="shape must be a sequence of int"):
        w.add("x", "F32", ["2"], 0, 0)
    w.abandon()
    assert not os.path.exists(path)


def test_write_bytes_refuses_a_strided_view(tmp_path):
    raw = np.arange(8, dtype=np.float32).tobytes()
    with ringsafe.Writer(str(tmp_path / "b.safetensors")) as w:
        with pytest.raises(TypeError, match="C-contiguous"):
            w.write_bytes("x", "F32", [4], memoryview(raw)[::2])
        w.write_bytes("y", "F32", [8], memoryview(raw))
    assert torch.equal(spt.load_file(str(tmp_path / "b.safetensors"))["y"], torch.arange(8, dtype=torch.float32))


SURROGATE = "bad\udcffname"


def test_a_str_option_with_no_utf8_form_is_a_value_error_naming_it(tmp_path):
    spt.save_file({"ok": torch.zeros(2)}, str(tmp_path / "o.safetensors"))
    with pytest.raises(ValueError, match="reader option token cannot be encoded as UTF-8"):
        ringsafe.Reader(str(tmp_path / "o.safetensors"), token=SURROGATE)


def test_names_that_have_no_utf8_form_raise_named_errors(tmp_path):
    t = torch.zeros(2)
    for call in (lambda: rpt.save_file({SURROGATE: t}, str(tmp_path / "n.safetensors")),
                 lambda: rpt.save({SURROGATE: t}),
                 lambda: ringsafe.serialize({SURROGATE: ringsafe.TensorSpec(dtype="float32", shape=[2],
                                                                           data_ptr=t.data_ptr(), data_len=8)})):
        with pytest.raises(ringsafe.SafetensorError, match=r"tensor name 'bad\\udcffname' cannot be encoded") as e:
            call()
        assert e.value.kind == "InvalidArgument"
    with pytest.raises(ringsafe.SafetensorError, match="cannot be encoded"):
        with ringsafe.Writer(str(tmp_path / "w.safetensors")) as w:
            w.write(SURROGATE, t)
    assert not (tmp_path / "w.safetensors").exists() and not (tmp_path / "n.safetensors").exists()
    spt.save_file({"ok": t}, str(tmp_path / "ok.safetensors"))
    with pytest.raises(ringsafe.SafetensorError, match="cannot be encoded"):
        rpt.load_file(str(tmp_path / "ok.safetensors"), select=[SURROGATE])
    with pytest.raises(ringsafe.SafetensorError, match="cannot be encoded"):
        rpt.save_file({"ok": t}, str(tmp_path / "m.safetensors"), metadata={"k": SURROGATE})


def test_paths_are_taken_as_the_operating_system_takes_them(tmp_path):
    # A name that is not UTF-8: os.fsdecode gives a str with a surrogate for
    # the byte; that str, the bytes, and PathLike objects all name the file.
    raw = os.fsencode(str(tmp_path)) + b"/m\xff.safetensors"
    name = os.fsdecode(raw)
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    rpt.save_file(tensors, name)
    assert os.path.exists(raw)
    assert spt.save(tensors) == open(raw, "rb").read()  # the reference's bytes
    for spelling in (name, raw):
        assert torch.equal(rpt.load_file(spelling)["w"], tensors["w"])
        assert torch.equal(rpt.load_file(spelling, backend="pread")["w"], tensors["w"])
        with ringsafe.safe_open(spelling, "pt") as f:
            assert torch.equal(f.get_slice("w")[1:], tensors["w"][1:])
    with ringsafe.Writer(raw + b".w") as w:
        w.write("w", tensors["w"])
    assert torch.equal(rpt.load_file(raw + b".w")["w"], tensors["w"])
    missing = os.fsdecode(os.fsencode(str(tmp_path)) + b"/gone\xfe.safetensors")
    with pytest.raises(FileNotFoundError) as e:
        rpt.load_file(missing)
    assert e.value.filename == missing  # as spelled, decoded as Python decodes paths


def test_metadata_is_refused_with_one_error_everywhere(tmp_path):
    # The package's check (_serialize.check_metadata) and the binding's say the same.
    bad = {"k": 1}
    calls = [lambda: ringsafe.serialize({}, bad), lambda: rpt.save({"a": torch.ones(1)}, metadata=bad),
             lambda: rnp.save({"a": np.ones(1)}, metadata=bad), lambda: _ringsafe.serialize([], bad),
             lambda: _ringsafe.save_declared(str(tmp_path / "x.safetensors"), [], bad)]
    for call in calls:
        with pytest.raises(TypeError, match=r"metadata must map str to str: 'k': 1"):
            call()
    for call in (lambda: ringsafe.serialize({}, ["k"]), lambda: _ringsafe.serialize([], ["k"])):
        with pytest.raises(TypeError, match="metadata must be a dict of str to str, got list"):
            call()
    assert not (tmp_path / "x.safetensors").exists()


def test_integer_arguments_are_converted_in_one_place(tmp_path):
    # arguments.cpp's index_int: the mapping's and the reader's offsets say the same.
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.ones(4)}, str(path))
    m = _ringsafe.MappedFile(str(path))
    r = _ringsafe.Reader(str(path))
    try:
        for value, kind, text in [(-1, ringsafe.SafetensorError, "must not be negative, got -1"),
                                  (1 << 70, ringsafe.SafetensorError, "1180591620717411303424 is too large"),
                                  (True, TypeError, "must be an int, not bool")]:
            with pytest.raises(kind, match="offset " + text):
                m.copy_to([(value, 1, np.zeros(1, np.uint8))])
            with pytest.raises(kind, match="box start " + text):
                r.box_bytes("a", [(value, 2)])
    finally:
        r.close()

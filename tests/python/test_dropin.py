"""ringsafe as a drop-in for the reference ``safetensors``: its whole public
surface, the reference's rule for shared storages, per-tensor storages of
loaded tensors, serialize/deserialize/TensorSpec, file objects and backend=.
Each behaviour is checked against the reference's output for the same input."""

import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import pytest
import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.numpy as snp
import safetensors.torch as spt
import torch

# Names the reference's modules import rather than define.
_IMPORTED = {"os", "sys", "torch", "np", "defaultdict", "Any", "Dict", "List", "Optional", "Set", "Tuple", "Union"}


def _public(module):
    return {n for n in vars(module) if not n.startswith("__") and n not in _IMPORTED}


@pytest.mark.parametrize("ref, mine", [(safetensors, ringsafe), (spt, rpt), (snp, rnp)],
                         ids=["safetensors", "torch", "numpy"])
def test_every_reference_name_exists(ref, mine):
    missing = _public(ref) - set(vars(mine)) - {"_safetensors_rust", "torch", "numpy"}
    assert not missing, f"{mine.__name__} lacks {sorted(missing)}"


def _checkpoint(tmp_path, name="model.safetensors"):
    torch.manual_seed(0)
    tensors = {
        "embed.weight": torch.randn(64, 16),
        "layers.0.w": torch.randn(16, 16).to(torch.bfloat16),
        "layers.0.b": torch.zeros(16, dtype=torch.float16),
        "layers.1.w": torch.randn(3, 16).to(torch.bfloat16),
        "ids": torch.arange(5, dtype=torch.int64),
        "empty": torch.empty(0, 4),
    }
    path = tmp_path / name
    spt.save_file(tensors, str(path), metadata={"format": "pt"})
    return path, tensors


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_save_file_of_load_file_is_byte_exact(tmp_path, backend):
    path, _ = _checkpoint(tmp_path)
    out = tmp_path / "out.safetensors"
    rpt.save_file(rpt.load_file(str(path), backend=backend), str(out), metadata={"format": "pt"})
    assert out.read_bytes() == path.read_bytes()
    for k, v in spt.load_file(str(out)).items():
        assert torch.equal(v, spt.load_file(str(path))[k])


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_subset_and_renamed_keys_save(tmp_path, backend):
    path, tensors = _checkpoint(tmp_path)
    loaded = rpt.load_file(str(path), backend=backend)
    subset = {"model." + k: v for k, v in loaded.items() if k.startswith("layers.0")}
    rpt.save_file(subset, str(tmp_path / "a.safetensors"))
    spt.save_file(subset, str(tmp_path / "b.safetensors"))  # the reference accepts them too
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    import huggingface_hub
    (tmp_path / "hub").mkdir()
    huggingface_hub.save_torch_state_dict(loaded, str(tmp_path / "hub"))
    assert set(spt.load_file(str(tmp_path / "hub" / "model.safetensors"))) == set(tensors)


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_loaded_tensors_have_storages_of_their_own(tmp_path, backend):
    path, tensors = _checkpoint(tmp_path)
    loaded = rpt.load_file(str(path), backend=backend)
    for name, t in loaded.items():
        if t.numel():
            assert rpt.storage_ptr(t) == t.data_ptr(), name
            assert rpt.storage_size(t) == t.numel() * t.element_size(), name
            assert rpt._is_complete(t)
    assert all(len(g) == 1 for g in rpt._find_shared_tensors(loaded))
    # torch.save of one small tensor writes that tensor, not everything loaded with it
    buf = io.BytesIO()
    torch.save(loaded["ids"], buf)
    assert len(buf.getvalue()) < 2048
    del loaded  # the memory goes with the last tensor; the others stay valid meanwhile
    one = rpt.load_file(str(path), backend=backend)["layers.0.w"]
    assert torch.equal(one, tensors["layers.0.w"])


def test_disjoint_views_of_one_storage_save_overlapping_ones_do_not(tmp_path):
    base = torch.arange(10, dtype=torch.float32)
    rpt.save_file({"x": base[:5], "y": base[5:]}, str(tmp_path / "a.safetensors"))
    spt.save_file({"x": base[:5], "y": base[5:]}, str(tmp_path / "b.safetensors"))
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    with pytest.raises(RuntimeError, match="Some tensors share memory.*save_model"):
        rpt.save_file({"x": base[:6], "y": base[5:]}, str(tmp_path / "c.safetensors"))
    assert not (tmp_path / "c.safetensors").exists()
    with pytest.raises(RuntimeError, match="share memory"):
        rpt.save({"x": base, "y": base})


def test_shared_helpers_agree_with_the_reference():
    base = torch.zeros(12)
    state = {"a": base, "b": base[:6], "c": base[6:], "d": torch.ones(3), "e": base.view(3, 4)}
    norm = lambda groups: sorted(sorted(g) for g in groups)  # noqa: E731
    assert norm(rpt._find_shared_tensors(state)) == norm(spt._find_shared_tensors(state))
    assert dict(rpt._remove_duplicate_names(state)) == dict(spt._remove_duplicate_names(state))
    assert dict(rpt._remove_duplicate_names(state, preferred_names=["e"])) == \
        dict(spt._remove_duplicate_names(state, preferred_names=["e"]))
    for t in state.values():
        assert rpt._end_ptr(t) == spt._end_ptr(t)
        assert rpt._is_complete(t) == spt._is_complete(t)
    meta = torch.empty(4, device="meta")
    assert rpt.storage_ptr(meta) == spt.storage_ptr(meta)
    assert rpt.storage_size(meta) == spt.storage_size(meta)
    with pytest.raises(RuntimeError, match="None is covering the entire storage"):
        rpt._remove_duplicate_names({"p": base[:6], "q": base[3:9]})


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
        self.b.weight = self.a.weight


def test_save_model_after_load_file_and_assign(tmp_path):
    torch.manual_seed(1)
    model = _Tied()
    spt.save_model(model, str(tmp_path / "ref.safetensors"))
    fresh = _Tied()
    fresh.load_state_dict(rpt.load_file(str(tmp_path / "ref.safetensors")), strict=False)
    rpt.save_model(fresh, str(tmp_path / "mine.safetensors"))
    assert (tmp_path / "mine.safetensors").read_bytes() == (tmp_path / "ref.safetensors").read_bytes()
    with torch.device("meta"):
        meta = torch.nn.Linear(8, 8)
    path = tmp_path / "lin.safetensors"
    spt.save_file(torch.nn.Linear(8, 8).state_dict(), str(path))
    meta.load_state_dict(rpt.load_file(str(path)), assign=True)
    rpt.save_file(meta.state_dict(), str(tmp_path / "again.safetensors"))
    assert (tmp_path / "again.safetensors").read_bytes() == path.read_bytes()


def test_serialize_matches_the_reference(tmp_path):
    a = torch.arange(6, dtype=torch.float32)
    b = torch.arange(3, dtype=torch.int64)
    f4 = torch.arange(4, dtype=torch.uint8)

    def specs(mod):
        return {
            "zb": mod.TensorSpec(dtype="int64", shape=[3], data_ptr=b.data_ptr(), data_len=24),
            "a": mod.TensorSpec(dtype="float32", shape=[2, 3], data_ptr=a.data_ptr(), data_len=24),
            "e": mod.TensorSpec(dtype="bfloat16", shape=[0, 2], data_ptr=0, data_len=0),
            "q": mod.TensorSpec(dtype="float4_e2m1fn_x2", shape=[2, 2], data_ptr=f4.data_ptr(), data_len=4),
        }

    mine, ref = specs(ringsafe), specs(safetensors)
    for k in mine:
        assert (mine[k].dtype, mine[k].shape, mine[k].data_len) == (ref[k].dtype, ref[k].shape, ref[k].data_len)
        assert repr(mine[k]) == repr(ref[k])
    assert ringsafe.serialize(mine, {"k": "v"}) == safetensors.serialize(ref, {"k": "v"})
    ringsafe.serialize_file(mine, tmp_path / "a.safetensors")
    safetensors.serialize_file(ref, str(tmp_path / "b.safetensors"))
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    blob = safetensors.serialize(ref)
    assert sorted(ringsafe.deserialize(blob)) == sorted(safetensors.deserialize(blob))
    got = rpt._view2torch(ringsafe.deserialize(blob))
    assert torch.equal(got["a"], a.view(2, 3)) and torch.equal(got["zb"], b)


def test_tensor_spec_refuses_what_the_reference_refuses():
    with pytest.raises(ringsafe.SafetensorError, match='Unknown dtype "F32"'):
        ringsafe.TensorSpec(dtype="F32", shape=[1], data_ptr=0, data_len=4)
    with pytest.raises(TypeError):
        ringsafe.TensorSpec("float32", [1], 0, 4)
    with pytest.raises(TypeError):
        ringsafe.TensorSpec(dtype=1, shape=[1], data_ptr=0, data_len=4)
    with pytest.raises(OverflowError):
        ringsafe.TensorSpec(dtype="float32", shape=[-1], data_ptr=0, data_len=4)
    x = torch.zeros(4)
    bad = {"x": ringsafe.TensorSpec(dtype="float32", shape=[4], data_ptr=x.data_ptr(), data_len=12)}
    with pytest.raises(ringsafe.SafetensorError, match="tensor 'x'.*16 bytes.*12"):
        ringsafe.serialize(bad)
    with pytest.raises(TypeError, match="TensorSpec"):
        ringsafe.serialize({"x": 1})
    # The reference crashes on a null pointer with bytes behind it; ringsafe refuses it.
    with pytest.raises(ringsafe.SafetensorError, match="data_ptr 0"):
        ringsafe.serialize({"x": ringsafe.TensorSpec(dtype="float32", shape=[4], data_ptr=0, data_len=16)})


def test_numpy_flatten_and_view_helpers(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(3, dtype=">i4")}
    keep = []
    flat = rnp._flatten(arrays, keep)
    assert ringsafe.serialize(flat) == snp.save(arrays)
    assert rnp._is_little_endian(arrays["a"]) and not rnp._is_little_endian(arrays["b"])
    back = rnp._view2np(ringsafe.deserialize(snp.save(arrays)))
    assert (back["b"] == arrays["b"]).all() and rnp._getdtype("F32") is np.float32


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_backend_is_accepted_everywhere(tmp_path, backend):
    path, tensors = _checkpoint(tmp_path)
    with ringsafe.safe_open(str(path), "pt", backend=backend) as f:
        assert torch.equal(f.get_tensor("embed.weight"), tensors["embed.weight"])
    with safetensors.safe_open(str(path), "pt", backend=backend) as ref:
        assert ref.keys() == sorted(tensors)
    model = torch.nn.Module()
    model.register_buffer("ids", torch.zeros(5, dtype=torch.int64))
    missing, unexpected = rpt.load_model(model, str(path), strict=False, backend=backend)
    assert torch.equal(model.ids, tensors["ids"]) and "ids" not in unexpected
    snp.save_file({"v": np.ones(3)}, str(tmp_path / "n.safetensors"))
    assert set(rnp.load_file(str(tmp_path / "n.safetensors"), backend=backend)) == {"v"}


def test_backend_refused_as_the_reference_refuses_it(tmp_path):
    path, _ = _checkpoint(tmp_path)
    for mod in (ringsafe, safetensors):
        with pytest.raises(mod.SafetensorError, match='backend "foo" is invalid'):
            mod.safe_open(str(path), "pt", backend="foo")
        with pytest.raises(TypeError):
            mod.safe_open(str(path), "pt", backend=None)
    with pytest.raises(ringsafe.SafetensorError, match="backend"):
        rpt.load_file(str(path), backend="direct")


def _mapping_of(address):
    """The path of the file mapping that holds ``address`` ('' for anonymous memory)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= address < hi:
                return parts[5].strip() if len(parts) > 5 else ""
    return None


def test_mmap_views_map_the_file_pread_owns_its_memory(tmp_path):
    path, tensors = _checkpoint(tmp_path)
    mapped = rpt.load_file(str(path))
    owned = rpt.load_file(str(path), backend="pread")
    assert _mapping_of(mapped["embed.weight"].data_ptr()) == str(path)
    assert _mapping_of(owned["embed.weight"].data_ptr()) != str(path)
    # mmap views survive the file being replaced by an atomic rename, as the reference's do
    with ringsafe.safe_open(str(path), "pt") as f:
        replacement = tmp_path / "new.safetensors"
        spt.save_file({k: torch.zeros_like(v) for k, v in tensors.items()}, str(replacement))
        os.replace(replacement, path)
        late = f.get_tensor("layers.1.w")
    for k, v in tensors.items():
        assert torch.equal(mapped[k], v) and torch.equal(owned[k], v)
    assert torch.equal(late, tensors["layers.1.w"])
    assert not rpt.load_file(str(path))["embed.weight"].any()


def test_mmap_refuses_a_file_replaced_between_its_header_and_its_mapping(tmp_path):
    # Same size, same header length, another layout: only the identity of the
    # file tells them apart, and mapping the new one would cut the wrong bytes.
    from ringsafe._mapped import MappedSource
    from ringsafe._source import open_reader
    path = tmp_path / "m.safetensors"
    spt.save_file({"a": torch.arange(4, dtype=torch.float32), "b": torch.arange(8, dtype=torch.float16)}, str(path))
    other = tmp_path / "other.safetensors"
    spt.save_file({"a": torch.zeros(8, dtype=torch.float16), "b": torch.zeros(4, dtype=torch.float32)}, str(other))
    assert other.stat().st_size == path.stat().st_size
    assert other.read_bytes()[:8] == path.read_bytes()[:8]
    reader = open_reader(str(path), {})
    try:
        os.replace(other, path)
        with pytest.raises(ringsafe.SafetensorError, match="replaced") as e:
            MappedSource(reader)
        assert e.value.kind == "ObjectChanged"
    finally:
        reader.close()
    assert torch.equal(rpt.load_file(str(path))["a"], torch.zeros(8, dtype=torch.float16))


def test_globs_mean_the_same_for_paths_and_file_objects(tmp_path):
    path = tmp_path / "g.safetensors"
    spt.save_file({"w*": torch.ones(2), "wx": torch.zeros(2), "\u00e9t\u00e9": torch.ones(1)}, str(path))
    for pattern, want in [("w\\*", ["w*"]), ("w?", ["w*", "wx"]), ("?t?", ["\u00e9t\u00e9"]), ("[!w]*", ["\u00e9t\u00e9"])]:
        by_path = rpt.load_file(str(path), select=pattern)
        with open(path, "rb") as f:
            by_object = rpt.load_file(f, select=pattern)
        assert sorted(by_path) == sorted(by_object) == sorted(want), pattern


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_file_objects(tmp_path, backend):
    path, tensors = _checkpoint(tmp_path)
    blob = path.read_bytes()
    for f in (io.BytesIO(blob), open(path, "rb")):
        with ringsafe.safe_open(f, "pt", backend=backend) as h:
            assert h.keys() == sorted(tensors) and h.metadata() == {"format": "pt"}
            for k, v in tensors.items():
                assert torch.equal(h.get_tensor(k), v)
            assert torch.equal(h.get_slice("embed.weight")[2:5, ::3], tensors["embed.weight"][2:5, ::3])
            assert set(h.get_tensors()) == set(tensors)
        assert not f.closed  # the caller's file stays open: it is the caller's
        f.close()
    with open(path, "rb") as f:
        with ringsafe._safe_open_handle(f, "pt", backend=backend) as mine, \
                safetensors._safe_open_handle(f, "pt", backend=backend) as ref:
            assert mine.keys() == ref.keys()
            for k in tensors:
                assert torch.equal(mine.get_tensor(k), ref.get_tensor(k))
    assert set(rpt.load_file(io.BytesIO(blob))) == set(tensors)


def test_file_objects_that_lie_are_refused(tmp_path):
    path, _ = _checkpoint(tmp_path)
    blob = path.read_bytes()
    with pytest.raises(ringsafe.SafetensorError, match="MetadataIncompleteBuffer|data section|incomplete"):
        ringsafe.safe_open(io.BytesIO(blob[:-10]), "pt")

    class Shrinking(io.BytesIO):
        def readinto(self, b):
            return 0 if self.tell() > 200 else super().readinto(b)

    with ringsafe.safe_open(Shrinking(blob), "pt") as h:
        with pytest.raises(ringsafe.SafetensorError, match="ended at offset"):
            h.get_tensor("embed.weight")

    class Stream(io.RawIOBase):
        def readable(self):
            return True

    with pytest.raises(ringsafe.SafetensorError, match="cannot seek"):
        ringsafe.safe_open(Stream(), "pt")
    with pytest.raises(TypeError):
        ringsafe._safe_open_handle(str(path), "pt")


def test_errors_have_the_reference_types(tmp_path):
    path, _ = _checkpoint(tmp_path)
    for mod in (ringsafe, safetensors):
        with mod.safe_open(str(path), "pt") as f:
            with pytest.raises(mod.SafetensorError):
                f.get_tensor("nope")
            with pytest.raises(IndexError):
                f.get_slice("embed.weight")[64]
        with pytest.raises(FileNotFoundError):
            mod.safe_open(str(tmp_path / "missing.safetensors"), "pt")
        f = mod.safe_open(str(path), "pt")
        f.__exit__(None, None, None)
        with pytest.raises(mod.SafetensorError):
            f.keys()


def test_pickled_loaded_tensors_carry_only_their_bytes(tmp_path):
    path, tensors = _checkpoint(tmp_path)
    loaded = rpt.load_file(str(path))
    again = pickle.loads(pickle.dumps(loaded["layers.1.w"]))
    assert torch.equal(again, tensors["layers.1.w"])
    assert again.untyped_storage().nbytes() == tensors["layers.1.w"].numel() * 2


def test_shared_groups_come_in_the_reference_order():
    # State-dict order, not sorted: code and tests compare these lists.
    w, v = torch.zeros(10), torch.zeros(4)
    state = {"z.weight": w, "y.weight": w[:5], "m": torch.ones(2), "c.bias": v, "b.bias": v, "a": torch.ones(3)}
    assert rpt._find_shared_tensors(state) == spt._find_shared_tensors(state)
    assert list(rpt._remove_duplicate_names(state).items()) == list(spt._remove_duplicate_names(state).items())
    # save_file names the groups in that order too.
    mine, ref = _both(lambda mod: mod.save_file({"q": w, "p": w, "s": v[:2], "r": v[1:3]}, "unused.safetensors"))
    for e in (mine, ref):
        assert type(e) is RuntimeError and str(e).index("'q'") < str(e).index("'s'")
    # The reference's text, word for word, with the group it names.
    group = {"p2": w[:6], "q2": w[4:]}
    msgs = []
    for mod in (rpt, spt):
        with pytest.raises(RuntimeError) as e:
            mod._remove_duplicate_names(group)
        msgs.append(str(e.value).replace("{'q2', 'p2'}", "{'p2', 'q2'}"))
    assert msgs[0] == msgs[1]


def _both(call):
    """The exceptions ``call(module)`` raises with ringsafe.torch and with the reference."""
    out = []
    for mod in (rpt, spt):
        with pytest.raises(Exception) as e:
            call(mod)
        out.append(e.value)
    return out


@pytest.mark.parametrize("case", ["not a dict", "not a tensor", "sparse", "non-contiguous",
                                  "not a tensor before sparse", "sparse before shared", "shared before layout"])
def test_save_errors_have_the_reference_types_messages_and_order(tmp_path, case):
    base = torch.zeros(4, 4)
    tensors = {
        "not a dict": [base],
        "not a tensor": {"a": base, "k": 3},
        "sparse": {"s": base.to_sparse(), "a": base, "t": base.to_sparse()},
        "non-contiguous": {"a": torch.ones(2), "n": base.t()},
        "not a tensor before sparse": {"s": base.to_sparse(), "k": 3},
        "sparse before shared": {"x": base, "y": base, "s": torch.ones(2, 2).to_sparse()},
        "shared before layout": {"n": torch.ones(3, 3).t(), "x": base, "y": base},
    }[case]
    mine, ref = _both(lambda mod: mod.save_file(tensors, str(tmp_path / "e.safetensors")))
    assert type(mine) is type(ref)
    if case == "shared before layout":
        assert "Some tensors share memory" in str(mine) and "Some tensors share memory" in str(ref)
    else:
        assert str(mine) == str(ref)
    assert not (tmp_path / "e.safetensors").exists()


def test_save_model_names_force_contiguous_as_the_reference_does(tmp_path):
    model = torch.nn.Linear(3, 4)
    with torch.no_grad():
        model.weight.set_(model.weight.detach().t().contiguous().t())
    mine, ref = _both(lambda mod: mod.save_model(model, str(tmp_path / "m.safetensors"), force_contiguous=False))
    assert type(mine) is type(ref) is ValueError and str(mine) == str(ref)
    assert "use save_model(..., force_contiguous=True)" in str(mine)


def test_a_missing_file_reads_as_the_reference_says_it(tmp_path):
    missing = str(tmp_path / "missing.safetensors")
    for mine, ref in (_both(lambda mod: mod.load_file(missing)),
                      _both(lambda mod: (ringsafe if mod is rpt else safetensors).safe_open(missing, "pt"))):
        assert isinstance(mine, FileNotFoundError) and isinstance(ref, FileNotFoundError)
        assert str(ref) == f"No such file or directory: {missing}"
        assert str(mine) == str(ref)  # code compares it
        assert isinstance(mine, ringsafe.SafetensorError)
        assert mine.errno == 2 and mine.filename == missing
        # The engine's detail, kept where str() does not show it; a traceback prints it.
        assert mine.detail == f"{missing}: open: No such file or directory" and mine.__notes__ == [mine.detail]
        assert mine.detail in "".join(traceback.format_exception(mine))
    # A shard of an index that is not there: the reference's text naming it; the detail names the index.
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": {"w": "gone.safetensors"}}')
    with pytest.raises(FileNotFoundError) as e:
        rpt.load_file(index)
    assert str(e.value) == f"No such file or directory: {tmp_path / 'gone.safetensors'}"
    assert str(index) in e.value.detail and "'gone.safetensors'" in e.value.detail


_LOCKED = """
import os, sys
import torch
import ringsafe, ringsafe.torch as rpt
if os.geteuid() == 0:  # root is not refused: become nobody (after the imports, which read root's files)
    os.setgid(65534)
    os.setuid(65534)
try:
    rpt.save_file({"a": torch.zeros(2)}, os.path.join(sys.argv[1], "x.safetensors"))
except PermissionError as e:
    print(type(e).__name__, isinstance(e, ringsafe.SafetensorError))
"""


def test_save_file_system_errors_are_also_safetensor_errors(tmp_path):
    # Code written for the reference wraps save_file in `except SafetensorError`;
    # code written for Python's errors catches the OSError subclass: both catch them.
    t = {"a": torch.zeros(2)}
    for target, cls in ((tmp_path, IsADirectoryError), (tmp_path / "no" / "x.safetensors", FileNotFoundError)):
        for catch in (ringsafe.SafetensorError, cls):
            with pytest.raises(catch) as e:
                rpt.save_file(t, str(target))
            assert isinstance(e.value, ringsafe.SafetensorError) and isinstance(e.value, cls)
            assert e.value.errno is not None and os.strerror(e.value.errno) in str(e.value)
    with pytest.raises(safetensors.SafetensorError):  # the reference raises its own error there
        spt.save_file(t, str(tmp_path))
    top = tempfile.mkdtemp(dir="/tmp")  # a directory nobody may enter, holding one nobody may not write
    try:
        os.chmod(top, 0o755)
        locked = os.path.join(top, "locked")
        os.mkdir(locked, 0o555)
        os.chmod(locked, 0o555)
        out = subprocess.run([sys.executable, "-c", _LOCKED, locked], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        assert out.returncode == 0 and out.stdout.split() == ["PermissionError", "True"], out.stdout + out.stderr
    finally:
        os.chmod(os.path.join(top, "locked"), 0o755)
        shutil.rmtree(top)
    # Pickled and unpickled (multiprocessing passes errors so), they are still both.
    with pytest.raises(FileNotFoundError) as e:
        rpt.load_file(str(tmp_path / "gone.safetensors"))
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is type(e.value) and again.filename == e.value.filename and again.kind == "IoError"


def test_conjugate_and_negative_views_save_the_values_they_show(tmp_path):
    # Both libraries used to save the bytes under a .conj() or ._neg_view(): the wrong values.
    c = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    n = torch.arange(4, dtype=torch.float32)
    tensors = {"c": c.conj(), "n": n._neg_view()}
    assert tensors["c"].is_conj() and tensors["n"].is_neg()
    rpt.save_file(tensors, str(tmp_path / "v.safetensors"))
    for loaded in (spt.load_file(str(tmp_path / "v.safetensors")), rpt.load(rpt.save(tensors))):
        assert torch.equal(loaded["c"], torch.tensor([1 - 2j, 3 + 4j], dtype=torch.complex64))
        assert torch.equal(loaded["n"], -n)
    with ringsafe.Writer(str(tmp_path / "w.safetensors")) as w:
        w.write("c", c.conj())
    assert torch.equal(spt.load_file(str(tmp_path / "w.safetensors"))["c"], c.conj().resolve_conj())
    assert not c.is_conj() and torch.equal(c, torch.tensor([1 + 2j, 3 - 4j]))  # the caller's tensor untouched
    dst = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(ValueError, match="conjugate view"):
        rpt.read_into(str(tmp_path / "v.safetensors"), {"c": dst.conj()})


class _Misbehaving(io.BytesIO):
    """A file object that breaks the protocol in one way; counts its calls so a loop shows."""

    def __init__(self, blob, how):
        super().__init__(blob)
        self.how, self.calls = how, 0

    def readinto(self, b):
        self.calls += 1
        if self.calls > 1000:
            raise RuntimeError("still looping")
        if self.how == "negative readinto":
            return -1
        if self.how == "readinto too much":
            n = super().readinto(b)
            return n + 5 if n else n
        return super().readinto(b)

    def seek(self, *a):
        pos = super().seek(*a)
        return None if self.how == "seek returns None" else pos


class _ReadOnly:
    """A file object with read() only, which returns more than it was asked for."""

    name = "readonly.bin"

    def __init__(self, blob):
        self.blob, self.pos = blob, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, off, whence=0):
        self.pos = off if whence == 0 else len(self.blob) + off
        return self.pos

    def read(self, n=-1):
        return self.blob[self.pos:self.pos + n + 3]


@pytest.mark.parametrize("how", ["negative readinto", "readinto too much", "seek returns None", "read too much"])
def test_file_objects_that_break_the_protocol_raise_safetensor_errors_naming_them(tmp_path, how):
    path, _ = _checkpoint(tmp_path)
    blob = path.read_bytes()
    f = _ReadOnly(blob) if how == "read too much" else _Misbehaving(blob, how)
    f.name = "weird.bin"
    with pytest.raises(ringsafe.SafetensorError, match="weird.bin: the file object broke the file protocol") as e:
        with ringsafe.safe_open(f, "pt") as h:
            h.get_tensor("embed.weight")
    assert e.value.kind == "InvalidArgument"
    assert getattr(f, "calls", 0) <= 2  # refused at once, never looping


def test_compressed_wrappers_are_read_through_their_own_read(tmp_path):
    # GzipFile and BZ2File expose the underlying file's fileno(): its bytes are compressed.
    import bz2
    import gzip
    path, tensors = _checkpoint(tmp_path)
    for opener, suffix in ((gzip.open, "gz"), (bz2.open, "bz2")):
        packed = tmp_path / f"model.safetensors.{suffix}"
        with opener(packed, "wb") as out:
            out.write(path.read_bytes())
        with opener(packed, "rb") as f, ringsafe.safe_open(f, "pt") as h:
            assert h.keys() == sorted(tensors)
            for k, v in tensors.items():
                assert torch.equal(h.get_tensor(k), v)
        bad = tmp_path / f"bad.safetensors.{suffix}"
        with opener(bad, "wb") as out:
            out.write(b"\xff" * 64)
        with opener(bad, "rb") as f:
            with pytest.raises(ringsafe.SafetensorError) as e:
                ringsafe.safe_open(f, "pt")
            assert str(bad) in str(e.value) and "/proc/self/fd" not in str(e.value)


def test_errors_of_a_plain_file_object_name_its_file(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}    " + b"\x00" * 8)
    with open(bad, "rb") as f:
        with pytest.raises(ringsafe.SafetensorError) as e:
            ringsafe.safe_open(f, "pt")
    assert str(bad) in str(e.value) and "/proc/self/fd" not in str(e.value)


def test_a_text_mode_file_object_reads_the_file_it_names(tmp_path):
    path, tensors = _checkpoint(tmp_path)
    with open(path, "r") as f:  # as code written for the reference may pass it
        with ringsafe._safe_open_handle(f, "pt") as mine, safetensors._safe_open_handle(f, "pt") as ref:
            assert mine.keys() == ref.keys() == sorted(tensors)
            for name in tensors:
                assert torch.equal(mine.get_tensor(name), ref.get_tensor(name))
        assert sorted(rpt.load_file(f)) == sorted(tensors)
    # One that names no real file keeps the protocol error, never a UnicodeDecodeError from its
    # read(): a StringIO (the reference: AttributeError, it has no name), a file removed since.
    gone = shutil.copy(path, tmp_path / "gone.safetensors")
    with open(gone, "r") as removed:
        os.remove(gone)
        for text in (io.StringIO("not a checkpoint"), removed):
            with pytest.raises(ringsafe.SafetensorError,
                               match=r"the file object broke the file protocol: a \w+ is text: its read\(\) returns str"):
                ringsafe._safe_open_handle(text, "pt")


def test_a_closed_file_object_is_reopened_by_its_name(tmp_path):
    path, tensors = _checkpoint(tmp_path)
    f = open(path, "rb")
    f.close()
    with ringsafe._safe_open_handle(f, "pt") as mine, safetensors._safe_open_handle(f, "pt") as ref:
        assert mine.keys() == ref.keys() == sorted(tensors)
        assert torch.equal(mine.get_tensor("embed.weight"), ref.get_tensor("embed.weight"))
    assert torch.equal(rpt.load_file(f)["ids"], tensors["ids"])
    b = io.BytesIO(path.read_bytes())
    b.close()
    with pytest.raises(ringsafe.SafetensorError, match="closed and has no name"):
        ringsafe.safe_open(b, "pt")


_OUT_OF_RANGE = [(slice(None), -6), (slice(None), 5), (0, 0, 5), (0, 3), (2,), (-3,), (0, -4), (..., 5), (..., -6),
                 (slice(1, 3), 5), (slice(0, 2, 2), 3), (slice(None, 3), 9), (slice(None, None, 2), 9),
                 (0, slice(None), 7), (5, 5), (-3, 9), (9, -4), (0, 9, -1), (0, -1, 9), 7, -7, (0, 0, 0, 0),
                 (0, 9, 0, 0), (-9, 0, 0, 0), (..., 0, 9, 0, 0), (slice(None),) * 4]


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_an_index_out_of_range_reads_as_the_reference_says_it(tmp_path, framework):
    # The reference's NumPy slices say "Invalid index -6 for dimension 1 of size 5" (and, past the
    # end, "Error during slicing [...] with shape [...]: ..."); its torch slices say torch's words.
    path = tmp_path / "s.safetensors"
    snp.save_file({"a": np.arange(30, dtype=np.float32).reshape(2, 3, 5), "s": np.array(3.0, np.float32)},
                  str(path))
    with ringsafe.safe_open(path, framework) as mine, safetensors.safe_open(str(path), framework) as ref:
        for name, index in [("a", i) for i in _OUT_OF_RANGE] + [("s", 0)]:
            with pytest.raises(Exception) as want:
                ref.get_slice(name)[index]
            with pytest.raises(IndexError) as got:
                mine.get_slice(name)[index]
            assert isinstance(got.value, ringsafe.SafetensorError)
            assert str(got.value) == str(want.value), (name, index)

"""ringsafe.torch.load_model / save_model against the reference's, on a small
transformer-like stack (Embedding, LayerNorm, Linear, buffers, tied head)."""

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch
from torch import nn

VOCAB, DIM, HIDDEN, LAYERS, CTX = 64, 32, 48, 2, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM, bias=False)
        self.v = nn.Linear(DIM, DIM, bias=False)
        self.o = nn.Linear(DIM, DIM)
        self.norm2 = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)
        self.register_buffer("mask", torch.tril(torch.ones(CTX, CTX, dtype=torch.bool)))


class TinyLM(nn.Module):
    def __init__(self, tie=False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(CTX, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        if tie:
            self.lm_head.weight = self.embed.weight
        self.register_buffer("position_ids", torch.arange(CTX, dtype=torch.int64))
        self.register_buffer("scratch", torch.zeros(4), persistent=False)  # never saved


def _seeded(seed, tie=False):
    torch.manual_seed(seed)
    m = TinyLM(tie)
    with torch.no_grad():
        # make the norms and buffers differ between seeds too
        for name, t in m.state_dict().items():
            if t.dtype.is_floating_point and "norm" in name:
                t.add_(torch.randn_like(t))
        m.position_ids.add_(seed)
    return m


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _bytes(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and sa[k].shape == sb[k].shape, k
        assert _bytes(sa[k]) == _bytes(sb[k]), k


def _unchanged(model, before):
    for k, v in model.state_dict().items():
        assert _bytes(v) == _bytes(before[k]), k


def test_load_model_in_place(tmp_path):
    path = tmp_path / "m.safetensors"
    src = _seeded(1)
    spt.save_model(src, str(path))
    dst = _seeded(2)
    assert not torch.equal(dst.layers[0].q.weight, src.layers[0].q.weight)
    params = dict(dst.named_parameters())
    ptrs = {k: v.data_ptr() for k, v in dst.state_dict().items()}
    missing, unexpected = rpt.load_model(dst, str(path))
    assert not missing and not unexpected
    _same_state(dst, src)
    # the same Parameter objects over the same memory: filled in place
    for k, p in dst.named_parameters():
        assert p is params[k], k
    for k, v in dst.state_dict().items():
        assert v.data_ptr() == ptrs[k], k
    # the non-persistent buffer is none of the file's business
    assert torch.equal(dst.scratch, torch.zeros(4))


def test_load_model_matches_reference(tmp_path):
    path = tmp_path / "m.safetensors"
    spt.save_model(_seeded(1), str(path))
    ours, ref = _seeded(2), _seeded(2)
    assert rpt.load_model(ours, str(path)) == spt.load_model(ref, str(path))
    _same_state(ours, ref)


def _file_with(tmp_path, change):
    path = tmp_path / "m.safetensors"
    state = _snapshot(_seeded(1))
    if change in ("missing", "both"):
        del state["layers.1.up.bias"]
        del state["position_ids"]
    if change in ("unexpected", "both"):
        state["extra.weight"] = torch.ones(3)
        state["layers.9.q.bias"] = torch.zeros(2)
    spt.save_file(state, str(path))
    return path


@pytest.mark.parametrize("change", ["missing", "unexpected", "both"])
def test_strict_mismatch_raises_like_reference_and_reads_nothing(tmp_path, change):
    path = _file_with(tmp_path, change)
    with pytest.raises(RuntimeError) as ref_error:
        spt.load_model(_seeded(2), str(path), strict=True)
    dst = _seeded(2)
    before = _snapshot(dst)
    with pytest.raises(RuntimeError) as our_error:
        rpt.load_model(dst, str(path), strict=True)
    assert str(our_error.value) == str(ref_error.value)
    assert "Error(s) in loading state_dict for TinyLM:" in str(our_error.value)
    if change != "unexpected":
        assert re.search(r'Missing key\(s\) in state_dict: "layers\.1\.up\.bias", "position_ids"',
                         str(our_error.value))
    if change != "missing":
        assert re.search(r'Unexpected key\(s\) in state_dict: "extra\.weight", "layers\.9\.q\.bias"',
                         str(our_error.value))
    _unchanged(dst, before)


@pytest.mark.parametrize("change", ["missing", "unexpected", "both"])
def test_non_strict_matches_reference(tmp_path, change):
    path = _file_with(tmp_path, change)
    ours_model, ref_model = _seeded(2), _seeded(2)
    ours = rpt.load_model(ours_model, str(path), strict=False)
    ref = spt.load_model(ref_model, str(path), strict=False)
    assert type(ours[0]) is type(ref[0]) and type(ours[1]) is type(ref[1])
    assert set(ours[0]) == set(ref[0])
    assert sorted(ours[1]) == sorted(ref[1])
    if change != "unexpected":
        assert set(ours[0]) == {"layers.1.up.bias", "position_ids"}
    _same_state(ours_model, ref_model)


def test_tied_weights_round_trip(tmp_path):
    ours_path, ref_path = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    src = _seeded(1, tie=True)
    assert src.lm_head.weight is src.embed.weight
    rpt.save_model(src, str(ours_path))
    spt.save_model(src, str(ref_path))
    # the same tensors kept, the same aliases recorded
    with ringsafe.safe_open(str(ours_path), "pt") as f, ringsafe.safe_open(str(ref_path), "pt") as g:
        assert f.keys() == g.keys()
        assert f.metadata() == g.metadata()
        assert ("embed.weight" in f.keys()) != ("lm_head.weight" in f.keys())
    # ours -> reference
    a = _seeded(2, tie=True)
    assert spt.load_model(a, str(ours_path)) == (set(), [])
    _same_state(a, src)
    assert a.lm_head.weight is a.embed.weight
    # reference -> ours, in place
    b = _seeded(3, tie=True)
    ptr = b.embed.weight.data_ptr()
    missing, unexpected = rpt.load_model(b, str(ref_path))
    assert not missing and not unexpected
    _same_state(b, src)
    assert b.lm_head.weight is b.embed.weight
    assert b.embed.weight.data_ptr() == ptr


def test_tied_model_from_untied_file_like_reference(tmp_path):
    # a file holding both names (an untied model's) loaded into a tied model:
    # one of the two is unexpected, as the reference reports it
    path = tmp_path / "untied.safetensors"
    spt.save_model(_seeded(1), str(path))
    ours_model, ref_model = _seeded(2, tie=True), _seeded(2, tie=True)
    with pytest.raises(RuntimeError) as ref_error:
        spt.load_model(_seeded(2, tie=True), str(path))
    with pytest.raises(RuntimeError) as our_error:
        rpt.load_model(_seeded(2, tie=True), str(path))
    assert str(our_error.value) == str(ref_error.value)
    ours = rpt.load_model(ours_model, str(path), strict=False)
    ref = spt.load_model(ref_model, str(path), strict=False)
    assert set(ours[0]) == set(ref[0]) == set()
    assert sorted(ours[1]) == sorted(ref[1])
    assert len(ours[1]) == 1 and ours[1][0] in ("embed.weight", "lm_head.weight")
    # The name reported unexpected is not loaded: the tied weight holds the
    # other one's values. (The reference reports the same name but copies it
    # anyway, last in module order, so its state is not compared here.)
    kept = ({"embed.weight", "lm_head.weight"} - set(ours[1])).pop()
    src = spt.load_file(str(path))
    assert ours_model.lm_head.weight is ours_model.embed.weight
    assert torch.equal(ours_model.embed.weight, src[kept])
    for k, v in ours_model.state_dict().items():
        if k not in ("embed.weight", "lm_head.weight"):
            assert _bytes(v) == _bytes(src[k]), k


@pytest.mark.parametrize("file_dtype,model_dtype", [(torch.bfloat16, torch.float32),
                                                    (torch.float32, torch.bfloat16),
                                                    (torch.float16, torch.float64)])
def test_dtype_mismatch_converts_like_reference(tmp_path, file_dtype, model_dtype):
    path = tmp_path / "m.safetensors"
    state = {k: (v.to(file_dtype) if v.dtype.is_floating_point else v)
             for k, v in _snapshot(_seeded(1)).items()}
    spt.save_file(state, str(path))
    ours_model, ref_model = _seeded(2).to(model_dtype), _seeded(2).to(model_dtype)
    ptrs = {k: v.data_ptr() for k, v in ours_model.state_dict().items()}
    assert rpt.load_model(ours_model, str(path)) == spt.load_model(ref_model, str(path))
    for k, v in ours_model.state_dict().items():
        if v.dtype.is_floating_point:
            assert v.dtype == model_dtype
            assert torch.equal(v, state[k].to(model_dtype)), k
        assert v.data_ptr() == ptrs[k], k
    _same_state(ours_model, ref_model)


def test_shape_mismatch_raises(tmp_path):
    path = tmp_path / "m.safetensors"
    state = _snapshot(_seeded(1))
    state["layers.0.up.weight"] = torch.zeros(HIDDEN, DIM - 1)
    spt.save_file(state, str(path))
    with pytest.raises(RuntimeError):
        spt.load_model(_seeded(2), str(path))
    dst = _seeded(2)
    before = _snapshot(dst)
    with pytest.raises(RuntimeError, match=re.escape("size mismatch for layers.0.up.weight")):
        rpt.load_model(dst, str(path))
    _unchanged(dst, before)
    with pytest.raises(RuntimeError, match=re.escape("layers.0.up.weight")):
        rpt.load_model(_seeded(2), str(path), strict=False)


def test_save_model_like_reference(tmp_path):
    ours_path, ref_path = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    src = _seeded(4)
    rpt.save_model(src, str(ours_path), metadata={"format": "pt"})
    spt.save_model(src, str(ref_path), metadata={"format": "pt"})
    assert ours_path.read_bytes() == ref_path.read_bytes()
    dst = _seeded(5)
    rpt.load_model(dst, str(ours_path))
    _same_state(dst, src)


def test_save_model_non_contiguous(tmp_path):
    m = _seeded(1)
    with torch.no_grad():
        m.layers[0].q.weight = nn.Parameter(m.layers[0].q.weight.detach().t().contiguous().t())
    assert not m.layers[0].q.weight.is_contiguous()
    path = tmp_path / "nc.safetensors"
    with pytest.raises(ValueError):
        rpt.save_model(m, str(path), force_contiguous=False)
    assert not path.exists()
    rpt.save_model(m, str(path), force_contiguous=True)
    dst = _seeded(2)
    spt.load_model(dst, str(path))
    _same_state(dst, m)


"""ringsafe.torch.load_model / save_model against the reference's."""

import pathlib
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


class Small(nn.Module):
    def __init__(self, tie=False):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.proj = nn.Linear(16, 24)
        self.norm = nn.LayerNorm(24)
        self.lm_head = nn.Linear(24 if not tie else 16, 50, bias=False)
        if tie:
            self.lm_head.weight = self.embed.weight
        self.register_buffer("scale", torch.arange(24, dtype=torch.float32))


def _seeded(seed, tie=False):
    torch.manual_seed(seed)
    m = Small(tie)
    with torch.no_grad():
        m.scale.mul_(seed)
        m.norm.weight.add_(seed)
    return m


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


def test_load_model_in_place(tmp_path):
    path = tmp_path / "m.safetensors"
    src = _seeded(1)
    spt.save_model(src, str(path))
    dst = _seeded(2)
    ptrs = {k: v.data_ptr() for k, v in dst.state_dict().items()}
    missing, unexpected = rpt.load_model(dst, str(path))
    assert not missing and not unexpected
    _same_state(dst, src)
    for k, v in dst.state_dict().items():
        assert v.data_ptr() == ptrs[k], k


@pytest.mark.parametrize("change", ["missing", "unexpected"])
def test_strict_mismatch_raises_and_leaves_params(tmp_path, change):
    path = tmp_path / "m.safetensors"
    state = {k: v.detach().clone() for k, v in _seeded(1).state_dict().items()}
    if change == "missing":
        del state["proj.bias"]
        word = "Missing key(s)"
    else:
        state["extra.weight"] = torch.ones(3)
        word = "Unexpected key(s)"
    spt.save_file(state, str(path))
    dst = _seeded(2)
    before = _snapshot(dst)
    with pytest.raises(RuntimeError, match=word.replace("(", r"\(").replace(")", r"\)")):
        rpt.load_model(dst, str(path), strict=True)
    for k, v in dst.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_non_strict_matches_reference(tmp_path):
    path = tmp_path / "m.safetensors"
    state = {k: v.detach().clone() for k, v in _seeded(1).state_dict().items()}
    del state["proj.bias"]
    del state["scale"]
    state["extra.weight"] = torch.ones(3)
    state["more.bias"] = torch.zeros(2)
    spt.save_file(state, str(path))
    ours_model, ref_model = _seeded(2), _seeded(2)
    ours = rpt.load_model(ours_model, str(path), strict=False)
    ref = spt.load_model(ref_model, str(path), strict=False)
    assert set(ours[0]) == set(ref[0]) == {"proj.bias", "scale"}
    assert sorted(ours[1]) == sorted(ref[1]) == ["extra.weight", "more.bias"]
    _same_state(ours_model, ref_model)


def test_tied_weights_round_trip(tmp_path):
    ours_path, ref_path = tmp_path / "ours.safetensors", tmp_path / "ref.safetensors"
    src = _seeded(1, tie=True)
    rpt.save_model(src, str(ours_path))
    spt.save_model(src, str(ref_path))
    # the same tensors are kept and the same aliases recorded
    with ringsafe.safe_open(str(ours_path), "pt") as f, ringsafe.safe_open(str(ref_path), "pt") as g:
        assert f.keys() == g.keys()
        assert f.metadata() == g.metadata()
    # ours -> reference
    a = _seeded(2, tie=True)
    spt.load_model(a, str(ours_path))
    _same_state(a, src)
    assert a.lm_head.weight is a.embed.weight
    # reference -> ours
    b = _seeded(3, tie=True)
    missing, unexpected = rpt.load_model(b, str(ref_path))
    assert not missing and not unexpected
    _same_state(b, src)
    assert b.lm_head.weight is b.embed.weight


def test_bf16_file_into_f32_model(tmp_path):
    path = tmp_path / "m.safetensors"
    state = {k: v.detach().to(torch.bfloat16) for k, v in _seeded(1).state_dict().items()}
    spt.save_file(state, str(path))
    ours_model, ref_model = _seeded(2), _seeded(2)
    rpt.load_model(ours_model, str(path))
    spt.load_model(ref_model, str(path))
    for k, v in ours_model.state_dict().items():
        assert v.dtype == torch.float32
        assert torch.equal(v, state[k].to(torch.float32)), k
    _same_state(ours_model, ref_model)


def test_shape_mismatch_raises(tmp_path):
    path = tmp_path / "m.safetensors"
    state = {k: v.detach().clone() for k, v in _seeded(1).state_dict().items()}
    state["proj.weight"] = torch.zeros(24, 15)
    spt.save_file(state, str(path))
    with pytest.raises(RuntimeError, match="proj.weight"):
        rpt.load_model(_seeded(2), str(path))
    with pytest.raises(RuntimeError):
        spt.load_model(_seeded(2), str(path))

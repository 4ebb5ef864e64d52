"""ringsafe in place of safetensors for code we do not own: ringsafe.install()
and RINGSAFE_AS_SAFETENSORS=1, then transformers, accelerate, diffusers and
huggingface_hub load and save through it. Tiny models made here (nothing is
downloaded); each result is compared with what the reference gives."""

import os
import subprocess
import sys
import types

import pytest
import ringsafe
import ringsafe.torch as rpt
import safetensors
import safetensors.torch as spt
import torch


@pytest.fixture
def switched(monkeypatch):
    """ringsafe.install() for one test (undone after it); yields a dict counting
    how many checkpoints ringsafe opened, so a test can tell it really ran."""
    import ringsafe._load as load_mod
    import ringsafe._open as open_mod
    opened = {"n": 0}
    for mod in (open_mod, load_mod):
        real = mod.open_source

        def counting(*args, _real=real, **kwargs):
            opened["n"] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(mod, "open_source", counting)
    ringsafe.install()
    try:
        yield opened
    finally:
        ringsafe.uninstall()


def test_install_reaches_modules_that_imported_the_reference_earlier():
    early = types.ModuleType("early_user")
    early.lf, early.so, early.sp = spt.load_file, safetensors.safe_open, spt.storage_ptr
    sys.modules["early_user"] = early
    ref_load_file = spt.load_file
    try:
        ringsafe.install()
        ringsafe.install()  # idempotent
        assert ringsafe.installed()
        import safetensors as now
        import safetensors.numpy as now_numpy
        import safetensors.torch as now_torch
        # What the switch hands out is ringsafe's, in objects of its own (uninstall tells them apart).
        assert issubclass(now.safe_open, ringsafe.safe_open) and now.__version__ == safetensors.__version__
        assert now_torch.load_file.__wrapped__ is rpt.load_file and now_numpy.load_file.__module__ == "ringsafe.numpy"
        assert early.lf.__wrapped__ is rpt.load_file and issubclass(early.so, ringsafe.safe_open)
        assert early.sp.__wrapped__ is rpt.storage_ptr
        assert spt.load_file is now_torch.load_file  # the reference's module object, held since before
        assert issubclass(ringsafe.SafetensorError, now.SafetensorError)  # catches every ringsafe error
    finally:
        ringsafe.uninstall()
        del sys.modules["early_user"]
    assert not ringsafe.installed()
    import safetensors as back
    assert back is safetensors and spt.load_file is ref_load_file and early.lf is ref_load_file
    assert "ringsafe" not in type(back.safe_open).__module__


_LATE_USER = """
import safetensors
import safetensors.torch as st
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
import ringsafe
from ringsafe import SafetensorError as own_error
from ringsafe.torch import load_file as own_load_file
"""


def test_uninstall_rebinds_what_modules_imported_while_installed(tmp_path):
    # A module imported while installed bound what `import safetensors` handed out;
    # after uninstall() those names are the reference's, and the names it took
    # from ringsafe itself stay ringsafe's.
    (tmp_path / "late_user.py").write_text(_LATE_USER)
    sys.path.insert(0, str(tmp_path))
    try:
        ringsafe.install()
        try:
            import late_user
            assert late_user.load_file.__wrapped__ is rpt.load_file
        finally:
            ringsafe.uninstall()
        assert late_user.load_file is spt.load_file and late_user.st is spt
        assert late_user.safetensors is safetensors and late_user.safe_open is safetensors.safe_open
        assert late_user.SafetensorError is safetensors.SafetensorError
        assert late_user.own_error is ringsafe.SafetensorError and late_user.own_load_file is rpt.load_file
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_user", None)


def test_reloads_under_the_switch_keep_the_package_whole():
    import importlib
    import importlib.util
    ringsafe.install()
    try:
        import safetensors as now
        import safetensors.torch as now_torch
        reference_dir = os.path.dirname(safetensors.__file__)
        # The reference's attributes: tools find the package through __file__ and __path__.
        assert now.__file__ == safetensors.__file__ and now.__path__ == [reference_dir]
        assert now.__version__ == safetensors.__version__ and now.__spec__.origin == safetensors.__file__
        importlib.reload(now)
        assert now.__path__ == [reference_dir] and now.__file__ == safetensors.__file__
        assert issubclass(now.safe_open, ringsafe.safe_open)
        # The reference's other submodules are found where they are (flax itself needs jax).
        assert importlib.util.find_spec("safetensors.flax").origin == os.path.join(reference_dir, "flax.py")
        importlib.reload(now_torch)
        assert now_torch.load_file.__wrapped__ is rpt.load_file
    finally:
        ringsafe.uninstall()
    # ringsafe's own modules keep their names and specs: they reload.
    assert rpt.__spec__.name == "ringsafe.torch"
    importlib.reload(rpt)


_SPAWNED = """
import multiprocessing as mp
import sys


def which(_):
    import safetensors.torch
    return safetensors.torch.load_file.__module__


if __name__ == "__main__":
    import ringsafe
    ringsafe.install()
    for method in ("spawn", "forkserver", "fork"):
        with mp.get_context(method).Pool(1) as pool:
            print(method, pool.map(which, [0])[0])
    ringsafe.uninstall()
    with mp.get_context("spawn").Pool(1) as pool:
        print("after", pool.map(which, [0])[0])
"""


def test_install_carries_over_to_spawned_children(tmp_path):
    # Children started by spawn and forkserver run the interpreter afresh: the
    # variable install() sets switches them at start-up, through the .pth file
    # the package installs in site-packages (here the build tree's, added as a
    # site directory by a sitecustomize, as site-packages is at start-up).
    (tmp_path / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({_site_dir()!r})\n")
    (tmp_path / "spawned.py").write_text(_SPAWNED)
    env = {k: v for k, v in os.environ.items() if k != "RINGSAFE_AS_SAFETENSORS"}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, str(tmp_path / "spawned.py")], env=env, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["spawn ringsafe.torch", "forkserver ringsafe.torch", "fork ringsafe.torch",
                                           "after safetensors.torch"], out.stdout


def _site_dir():
    """The folder that holds the ringsafe package and ringsafe-safetensors.pth."""
    return os.path.dirname(os.path.dirname(os.path.abspath(ringsafe.__file__)))


@pytest.mark.parametrize("value, expect", [("1", "ringsafe.torch"), ("0", "safetensors.torch"),
                                           (None, "safetensors.torch")])
def test_environment_variable_installs_at_start_up(value, expect):
    site_dir = _site_dir()
    assert os.path.isfile(os.path.join(site_dir, "ringsafe-safetensors.pth"))
    env = {k: v for k, v in os.environ.items() if k != "RINGSAFE_AS_SAFETENSORS"}
    env["PYTHONPATH"] = ""
    if value is not None:
        env["RINGSAFE_AS_SAFETENSORS"] = value
    # site.addsitedir runs the folder's .pth files as interpreter start-up does for site-packages.
    code = (f"import site; site.addsitedir({site_dir!r}); import safetensors.torch as t; "
            "print(t.load_file.__module__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expect


def _tiny(arch, dtype):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if arch == "llama":
        cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        return transformers.LlamaForCausalLM(cfg).to(dtype).eval()
    cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    return transformers.GPT2LMHeadModel(cfg).to(dtype).eval()


def _same_parameters(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_transformers_from_pretrained_and_save_pretrained(tmp_path, switched, arch, dtype, sharded):
    model = _tiny(arch, dtype)
    cls = type(model)
    ringsafe.uninstall()  # the reference writes the checkpoint and loads the model to compare with
    model.save_pretrained(tmp_path / "ref", max_shard_size="40KB" if sharded else "1GB")
    assert (tmp_path / "ref" / "model.safetensors.index.json").exists() == sharded
    reference = cls.from_pretrained(tmp_path / "ref", dtype=dtype).eval()
    ringsafe.install()
    kwargs = [dict(dtype=dtype), dict(dtype=dtype, device_map="cpu"), dict(dtype=dtype, low_cpu_mem_usage=True)]
    x = torch.randint(0, 96, (2, 7))
    for kw in kwargs:
        before = switched["n"]
        got = cls.from_pretrained(tmp_path / "ref", **kw).eval()
        assert switched["n"] > before, "transformers did not load through ringsafe"
        _same_parameters(reference, got)
        with torch.no_grad():
            assert torch.equal(reference(x).logits, got(x).logits)
    with torch.no_grad():
        assert torch.equal(got.generate(x, max_new_tokens=4, do_sample=False),
                           reference.generate(x, max_new_tokens=4, do_sample=False))
    got.save_pretrained(tmp_path / "mine", max_shard_size="40KB" if sharded else "1GB")
    ringsafe.uninstall()
    _same_parameters(reference, cls.from_pretrained(tmp_path / "mine", dtype=dtype))
    ringsafe.install()


def test_accelerate_load_checkpoint_and_dispatch(tmp_path, switched):
    accelerate = pytest.importorskip("accelerate")
    model = _tiny("llama", torch.float32)
    model.save_pretrained(tmp_path / "ckpt", max_shard_size="40KB")
    with accelerate.init_empty_weights():
        empty = type(model)(model.config)
    loaded = accelerate.load_checkpoint_and_dispatch(empty, str(tmp_path / "ckpt"), device_map={"": "cpu"})
    assert switched["n"] > 0
    _same_parameters(model, loaded)


def test_huggingface_hub_state_dict_round_trip(tmp_path, switched):
    hub = pytest.importorskip("huggingface_hub")
    model = _tiny("gpt2", torch.float32)  # tied embeddings: shared tensors on the way out
    (tmp_path / "hub").mkdir()
    (tmp_path / "again").mkdir()
    hub.save_torch_model(model, tmp_path / "hub", max_shard_size="40KB")
    hub.save_torch_state_dict(rpt.load_file(str(next((tmp_path / "hub").glob("*.safetensors")))),
                              tmp_path / "again")
    fresh = _tiny("gpt2", torch.float32)
    for p in fresh.parameters():
        torch.nn.init.zeros_(p)
    hub.load_torch_model(fresh, tmp_path / "hub")
    assert switched["n"] > 0
    _same_parameters(model, fresh)
    ringsafe.uninstall()
    fresh2 = _tiny("gpt2", torch.float32)
    hub.load_torch_model(fresh2, tmp_path / "hub")  # what ringsafe wrote, read by the reference
    _same_parameters(model, fresh2)
    ringsafe.install()


def test_diffusers_from_pretrained(tmp_path, switched):
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                                 block_out_channels=(8, 16), norm_num_groups=4,
                                 down_block_types=("DownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "UpBlock2D")).eval()
    ringsafe.uninstall()
    unet.save_pretrained(tmp_path / "unet")
    reference = diffusers.UNet2DModel.from_pretrained(tmp_path / "unet").eval()
    ringsafe.install()
    got = diffusers.UNet2DModel.from_pretrained(tmp_path / "unet").eval()
    assert switched["n"] > 0
    _same_parameters(reference, got)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(reference(x, 1).sample, got(x, 1).sample)

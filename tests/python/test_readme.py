"""The Python examples of the front page (README.md, "## Python") and of the
package's guide (engine/python/README.md, "## The API") run as written, each
page in a temporary directory of its own."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRONT = ROOT / "README.md"
GUIDE = ROOT / "engine" / "python" / "README.md"


def python_blocks(page, heading):
    text = page.read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run_blocks(page, heading):
    namespace = {}
    for block in python_blocks(page, heading):
        exec(compile(block, str(page), "exec"), namespace)
    return namespace


def test_pages_have_python_examples():
    assert len(python_blocks(FRONT, "## Python")) >= 1
    assert len(python_blocks(GUIDE, "## The API")) >= 2


def test_front_page_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(FRONT, "## Python")
    torch = ns["torch"]
    assert sorted(ns["norm"]) == ["norm.weight"]
    assert torch.equal(ns["dst"]["norm.weight"], torch.ones(64))
    assert ns["rows"].shape == (250, 64)
    assert (set(ns["missing"]), set(ns["unexpected"])) == (set(), {"norm.weight"})


def test_guide_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    ns = run_blocks(GUIDE, "## The API")
    # What the examples promise, checked after they ran.
    torch = ns["torch"]
    assert sorted(ns["mlp"]) == ["model.layers.0.mlp.weight"]
    assert torch.equal(ns["dst"]["model.layers.0.norm.weight"], torch.ones(64))
    assert ns["missing"] == set() or isinstance(ns["missing"], set)
    assert torch.equal(ns["model"].model.embed.weight.detach(), ns["tensors"]["model.embed.weight"])
    import ringsafe

    assert not ringsafe.installed()
    assert ns["gpt2"].transformer.wte.weight.shape == (96, 32)
    with ringsafe.safe_open("quantized.safetensors", "pt") as f:
        assert "extra.scale" in f.keys() and f.metadata() == {"quant": "int8"}
        assert f.get_tensor("model.layers.0.norm.weight").dtype == torch.int8

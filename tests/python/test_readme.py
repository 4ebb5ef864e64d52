"""The README's Python examples run as written (in a temporary directory)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def python_blocks():
    text = README.read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_has_python_examples():
    assert len(python_blocks()) >= 2


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)
    # What the examples promise, checked after they ran.
    torch = namespace["torch"]
    assert sorted(namespace["mlp"]) == ["model.layers.0.mlp.weight"]
    assert torch.equal(namespace["dst"]["model.layers.0.norm.weight"], torch.ones(64))
    assert namespace["missing"] == set() or isinstance(namespace["missing"], set)
    assert torch.equal(namespace["model"].model.embed.weight.detach(), namespace["tensors"]["model.embed.weight"])
    import ringsafe

    assert not ringsafe.installed()
    assert namespace["gpt2"].transformer.wte.weight.shape == (96, 32)
    with ringsafe.safe_open("quantized.safetensors", "pt") as f:
        assert "extra.scale" in f.keys() and f.metadata() == {"quant": "int8"}
        assert f.get_tensor("model.layers.0.norm.weight").dtype == torch.int8

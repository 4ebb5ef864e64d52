"""ringsafe.transformers.from_pretrained(source, gguf_file=NAME) gives the model
transformers' own from_pretrained(folder, gguf_file=NAME) gives: a small
llama-architecture GGUF made here with gguf-py's GGUFWriter (Q8_0, F16 and F32
tensors, llama.cpp's config keys, a tiny tokenizer), both loaders, the state
dicts equal, from a local folder and from hf:// (the Hub stand-in)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
pytest.importorskip("accelerate")  # transformers' gguf_file loading needs it

import ringsafe.transformers  # noqa: E402
from gguf_blocks import add_llama_metadata  # noqa: E402

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 64, 128, 2, 4, 2, 96
NAME = "tiny-llama-Q8_0.gguf"


def write_llama(path):
    rng = np.random.default_rng(3)
    q8 = gguf.GGMLQuantizationType.Q8_0
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny llama")
    add_llama_metadata(w, hidden=HIDDEN, ffn=FFN, layers=LAYERS, heads=HEADS, kv_heads=KV_HEADS, vocab=VOCAB)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def tensor(name, shape, kind):
        values = rng.standard_normal(shape).astype(np.float32) * 0.05
        if kind == "Q8_0":
            w.add_tensor(name, gguf.quants.quantize(values, q8), raw_dtype=q8)
        elif kind == "F16":
            w.add_tensor(name, values.astype(np.float16))
        else:
            w.add_tensor(name, values + 1.0)

    kv = KV_HEADS * HIDDEN // HEADS
    tensor("token_embd.weight", (VOCAB, HIDDEN), "Q8_0")
    for i in range(LAYERS):
        tensor(f"blk.{i}.attn_norm.weight", (HIDDEN,), "F32")
        tensor(f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), "Q8_0")
        tensor(f"blk.{i}.attn_k.weight", (kv, HIDDEN), "Q8_0")
        tensor(f"blk.{i}.attn_v.weight", (kv, HIDDEN), "F16")
        tensor(f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN), "Q8_0")
        tensor(f"blk.{i}.ffn_norm.weight", (HIDDEN,), "F32")
        tensor(f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), "Q8_0")
        tensor(f"blk.{i}.ffn_up.weight", (FFN, HIDDEN), "F16")
        tensor(f"blk.{i}.ffn_down.weight", (HIDDEN, FFN), "Q8_0")
    tensor("output_norm.weight", (HIDDEN,), "F32")
    tensor("output.weight", (VOCAB, HIDDEN), "Q8_0")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-llama-gguf")
    write_llama(d / NAME)
    return d


def assert_same_model(ours, theirs):
    """The same class, config and state dict. transformers' own marks its config with a
    quantization_config (its GGUF quantizer, which also makes the model refuse
    save_pretrained); ringsafe's model is a plain one, which saves."""
    assert type(ours) is type(theirs)
    mine, reference = ours.config.to_dict(), theirs.config.to_dict()
    reference.pop("quantization_config")
    assert mine | {"_name_or_path": ""} == reference | {"_name_or_path": ""}
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.bfloat16])
def test_the_same_model_as_transformers(folder, dtype, tmp_path):
    kw = {} if dtype is None else {"dtype": dtype}
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=NAME, **kw)
    ours = ringsafe.transformers.from_pretrained(folder, transformers.AutoModelForCausalLM, gguf_file=NAME, **kw)
    assert_same_model(ours, theirs)
    ids = torch.tensor([[1, 5, 9, 12]])
    assert torch.equal(ours(ids).logits, theirs(ids).logits)
    ours.save_pretrained(tmp_path / "saved")  # a plain model: it saves, and reads back the same
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "saved", **kw)
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), ours.state_dict().values()))


def test_from_the_hub(folder, tmp_path, tmp_path_factory, monkeypatch):
    from servers import hub_environment
    with hub_environment(tmp_path_factory, monkeypatch, tmp_path / "cache") as hub:
        hub.add_repo("acme/tiny-llama-gguf", {NAME: folder / NAME})
        theirs = transformers.LlamaForCausalLM.from_pretrained(folder, gguf_file=NAME, dtype=torch.bfloat16)
        ours = ringsafe.transformers.from_pretrained("hf://acme/tiny-llama-gguf", transformers.LlamaForCausalLM,
                                                     gguf_file=NAME, dtype=torch.bfloat16)
        assert_same_model(ours, theirs)
        assert ours.name_or_path == "hf://acme/tiny-llama-gguf"
        assert not (tmp_path / "cache").exists()  # no disk copy

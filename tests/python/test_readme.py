"""The Python examples of the front page (README.md, "## Python" and "## Sources",
the latter against real stand-ins of each store) and of the package's guide
(engine/python/README.md, "## The API") run as written, each page in a temporary
directory of its own."""

import pathlib
import re

import pytest

from servers import radosgw_cluster  # noqa: F401 - pytest fixture (the Sources example reads s3://)

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
    assert torch.equal(ns["rows"], torch.arange(4.0, 12.0).reshape(2, 4))  # the engine's reads, by record
    assert torch.equal(ns["whole"], torch.arange(12.0).reshape(3, 4))
    assert ns["reader"].closed
    assert ns["gpt2"].transformer.wte.weight.shape == (96, 32)
    with ringsafe.safe_open("quantized.safetensors", "pt") as f:
        assert "extra.scale" in f.keys() and f.metadata() == {"quant": "int8"}
        assert f.get_tensor("model.layers.0.norm.weight").dtype == torch.int8
    import gguf
    import numpy as np
    assert (ns["arch"], ns["context"]) == ("llama", 2048)
    assert ns["records"] == [("token_embd.weight", "Q8_0", (8, 64), (64, 8)), ("output_norm.weight", "F32", (64,), (64,))]
    q8 = gguf.quants.dequantize(ns["blocks"].numpy(), gguf.GGMLQuantizationType.Q8_0)
    assert np.array_equal(ns["embed"].numpy(), q8)
    assert ns["blocks"].shape == (8, 68) and ns["weights"]["token_embd.weight"].dtype == torch.bfloat16
    from safetensors.torch import load_file as reference_load
    converted = reference_load("tiny.safetensors")
    assert ns["st"].files == ("tiny.safetensors",) and converted["token_embd.weight"].dtype == torch.bfloat16
    assert torch.equal(converted["token_embd.weight"], torch.from_numpy(q8).to(torch.bfloat16))
    assert gguf.GGUFReader("tiny-bf16.gguf").tensors[0].tensor_type.name == "BF16"
    assert ns["parts"].files == ("split-00001-of-00002.gguf", "split-00002-of-00002.gguf")
    assert [t.name for t in gguf.GGUFReader("split-00002-of-00002.gguf").tensors] == ["output_norm.weight"]


def test_sources_example_runs_against_the_stand_ins(tmp_path, tmp_path_factory, monkeypatch, radosgw_cluster):
    """The front page's Sources example, as written, against the Hub stand-in, fake-gcs-server,
    the Azure Blob stand-in and radosgw, each told by the variables its users set."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    blob = pytest.importorskip("azure.storage.blob")
    from servers import AZURE_DEV_ACCOUNT, AZURE_DEV_KEY, FakeGcs, HubStandin, ServerUnavailable, Standin

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    folder = tmp_path / "tiny-llama"
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    weights = folder / "model.safetensors"
    gcs_data = tmp_path / "gcs"
    (gcs_data / "acme-models" / "tiny-llama").mkdir(parents=True)
    (gcs_data / "acme-models" / "tiny-llama" / "model.safetensors").write_bytes(weights.read_bytes())
    servers = []
    try:
        hub = HubStandin(tmp_path / "hub", tmp_path_factory.mktemp("hub-run"))
        servers.append(hub)
        gcs = FakeGcs(gcs_data, tmp_path_factory.mktemp("gcs-log"))
        servers.append(gcs)
        az = Standin("azure_blob_standin.py", ["--data", tmp_path / "az", "--key", AZURE_DEV_KEY],
                     tmp_path_factory.mktemp("az-log"))
        servers.append(az)
    except ServerUnavailable as e:
        for s in servers:
            s.close()
        pytest.skip(str(e))
    try:
        hub.add_repo("acme/tiny-llama", {p.name: p for p in folder.iterdir()})
        conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURE_DEV_ACCOUNT};AccountKey={AZURE_DEV_KEY};"
                f"BlobEndpoint={az.url}/{AZURE_DEV_ACCOUNT};")
        svc = blob.BlobServiceClient.from_connection_string(conn)
        svc.create_container("models")
        with open(weights, "rb") as f:
            svc.get_blob_client("models", "tiny-llama/model.safetensors").upload_blob(f)
        assert radosgw_cluster.create_bucket("acme-models") == 200
        assert radosgw_cluster.put_object("acme-models", "tiny-llama/model.safetensors", weights) == 200

        for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_TOKEN_PATH", "AWS_SESSION_TOKEN",
                    "AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_cache"))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint)
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
        for k, v in radosgw_cluster.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.chdir(tmp_path)

        ns = run_blocks(FRONT, "## Sources")
        from safetensors.torch import load_file as reference_load
        expected = reference_load(str(weights))
        for name in ("hub", "gcs", "azure", "s3"):
            got = ns[name]
            assert sorted(got) == sorted(expected), name
            assert all(torch.equal(got[k], expected[k]) for k in expected), name
        state = ns["model"].state_dict()
        assert all(torch.equal(state[k], expected[k]) for k in expected)
        assert hub.cdn_auth_requests() == []
    finally:
        for s in servers:
            s.close()

"""hf:// URLs from Python against the Hub stand-in (tests/support/hub_standin.cpp,
an nginx CDN behind it that refuses Authorization), with huggingface_hub and
transformers from PyPI as the reference clients, pointed at the stand-in with
HF_ENDPOINT in processes of their own (they read it when imported):

- every loading call reads hf:// (load_file, safe_open, load_model, read_into,
  iter_tensors, NumPy, ringsafe.distributed) and gets hf_hub_download's bytes;
- a cache ringsafe wrote (cache=True) is read by huggingface_hub and
  transformers with HF_HUB_OFFLINE=1; a cache huggingface_hub wrote is read by
  ringsafe with no request made, through the mmap backend;
- ringsafe.transformers.from_pretrained gives transformers' own state dict,
  tied weights and all, with every file from one commit;
- gated repos and tokens: the error names the repo and never the token;
- the bytes are checked against the Hub's sha256 (verify=): a CDN that swaps
  them under one ETag, an empty 200, a flipped or planted cache blob.
No Authorization header ever reaches the CDN (checked after every test)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("huggingface_hub")

import numpy as np  # noqa: E402
import ringsafe  # noqa: E402
import ringsafe.numpy as rnp  # noqa: E402
import ringsafe.torch as rt  # noqa: E402
import safetensors.torch as st  # noqa: E402
from servers import FaultServer, HubStandin, ServerUnavailable  # noqa: E402


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    try:
        h = HubStandin(tmp_path_factory.mktemp("hub"), tmp_path_factory.mktemp("hub-run"))
    except ServerUnavailable as e:
        pytest.skip(str(e))
    yield h
    h.close()


@pytest.fixture(autouse=True)
def hub_env(hub, monkeypatch, tmp_path):
    """Each test: its own empty Hub cache, the stand-in as HF_ENDPOINT, no token of the
    machine's; afterwards, no request that reached the CDN carried Authorization."""
    for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
              "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH", "HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    yield
    assert hub.cdn_auth_requests() == [], "an Authorization header reached the CDN"


def reference(code, env=None, timeout=300):
    """Runs ``code`` in a fresh Python (huggingface_hub / transformers read HF_ENDPOINT when
    imported) with this process's environment plus ``env``; returns its stdout's last line as JSON."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})), timeout=timeout)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def checkpoint(tmp_path, name="model.safetensors", seed=0, layers=3):
    g = torch.Generator().manual_seed(seed)
    t = {f"layers.{i}.w": torch.randn(64, 48, generator=g).to(torch.bfloat16) for i in range(layers)}
    t["norm"] = torch.rand(48, generator=g)
    t["ids"] = torch.arange(1000, dtype=torch.int64)
    path = tmp_path / f"{seed}-{name}"
    st.save_file(t, str(path), metadata={"format": "pt"})
    return t, path


def sharded(tmp_path, seed=0):
    """A checkpoint in 2 shards and its index: (tensors, {file name: path})."""
    t, _ = checkpoint(tmp_path, seed=seed)
    names = sorted(t)
    files, weight_map = {}, {}
    for k in range(2):
        part = {n: t[n] for n in names[k::2]}
        fname = f"model-0000{k + 1}-of-00002.safetensors"
        path = tmp_path / f"{seed}-{fname}"
        st.save_file(part, str(path), metadata={"format": "pt"})
        files[fname] = path
        weight_map.update({n: fname for n in part})
    index = tmp_path / f"{seed}-index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    files["model.safetensors.index.json"] = index
    return t, files


def same(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(x)
        assert x.dtype == y.dtype and torch.equal(x, y), k


def test_hf_hub_download_gives_the_bytes_ringsafe_reads(hub, tmp_path):
    t, path = checkpoint(tmp_path)
    commit = hub.add_repo("org/single", {"model.safetensors": path})
    _, files = sharded(tmp_path, seed=1)
    hub.add_repo("org/sharded", files)
    got = reference("""
        import json, hashlib
        from huggingface_hub import hf_hub_download
        out = {}
        for repo, f in [("org/single", "model.safetensors"), ("org/sharded", "model-00001-of-00002.safetensors"),
                        ("org/sharded", "model-00002-of-00002.safetensors")]:
            out[repo + "/" + f] = hf_hub_download(repo, f)
        print(json.dumps(out))
    """, {"HF_HUB_CACHE": str(tmp_path / "reference-cache")})
    assert pathlib.Path(got["org/single/model.safetensors"]).read_bytes() == path.read_bytes()
    same(rt.load_file("hf://org/single"), st.load_file(got["org/single/model.safetensors"]))
    same(rt.load_file(f"hf://org/single@{commit}/model.safetensors", backend="pread"), t)
    ref = {}
    for k, v in got.items():
        if k.startswith("org/sharded"):
            ref.update(st.load_file(v))
    same(rt.load_file("hf://org/sharded"), ref)
    same(rt.load_file("hf://org/sharded/model.safetensors.index.json"), ref)
    assert not (tmp_path / "cache").exists()  # nothing cached without cache=True


def test_every_loading_call_reads_hf_urls(hub, tmp_path):
    t, path = checkpoint(tmp_path)
    hub.add_repo("org/calls", {"model.safetensors": path})
    url = "hf://org/calls"
    with ringsafe.safe_open(url, "pt") as f:
        assert sorted(f.keys()) == sorted(t)
        assert torch.equal(f.get_tensor("norm"), t["norm"])
        assert torch.equal(f.get_slice("layers.1.w")[3:9], t["layers.1.w"][3:9])
    dst = {k: torch.empty_like(v) for k, v in t.items()}
    rt.read_into(url, dst)
    same(dst, t)
    streamed = dict(rt.iter_tensors(url, memory_limit=1 << 16))
    same(streamed, t)
    model = torch.nn.Module()
    for k, v in t.items():
        *mods, leaf = k.split(".")
        m = model
        for part in mods:
            if not hasattr(m, part):
                m.add_module(part, torch.nn.Module())
            m = getattr(m, part)
        m.register_parameter(leaf, torch.nn.Parameter(torch.zeros_like(v), requires_grad=False))
    missing, unexpected = rt.load_model(model, url)
    assert not missing and not unexpected
    same(model.state_dict(), t)
    arrays = rnp.load_file(url, select=["norm", "ids"])
    assert np.array_equal(arrays["ids"], t["ids"].numpy())


def _rank(rank, port, url, env, out):
    """One rank of a gloo group of 2: rd.load_file(url) saved to ``out`` (torch.save), or
    its error's (kind, message) in ``out``.json."""
    os.environ.update(env)
    import torch.distributed as dist
    import ringsafe.distributed as rd
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        got = rd.load_file(url)
        torch.save({k: v.clone() for k, v in got.items()}, out)
    except ringsafe.SafetensorError as e:
        pathlib.Path(out + ".json").write_text(json.dumps([e.kind, str(e)]))
    finally:
        dist.destroy_process_group()


def _two_ranks(tmp_path, url):
    """Runs _rank on 2 processes; each rank's result: a state dict, or (kind, message)."""
    import multiprocessing as mp
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: os.environ[k] for k in ("HF_ENDPOINT", "HF_HUB_CACHE", "HF_HOME")}
    ctx = mp.get_context("spawn")
    outs = [str(tmp_path / f"rank{r}-{port}.pt") for r in range(2)]
    procs = [ctx.Process(target=_rank, args=(r, port, url, env, outs[r])) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return [json.loads(pathlib.Path(o + ".json").read_text()) if os.path.exists(o + ".json") else torch.load(o)
            for o in outs]


def test_ringsafe_distributed_reads_hf_urls(hub, tmp_path):
    t, files = sharded(tmp_path, seed=2)
    hub.add_repo("org/dist", files)
    for got in _two_ranks(tmp_path, "hf://org/dist"):
        same(got, t)


def test_ringsafe_distributed_refuses_ranks_that_read_two_commits(hub, tmp_path):
    _, f1 = sharded(tmp_path, seed=6)
    _, f2 = sharded(tmp_path, seed=7)  # the same names and shapes, other bytes
    c1 = hub.add_repo("org/dist-moving", f1)
    c2 = hub.add_repo("org/dist-moving", f2, branch="")
    hub.control("org/dist-moving", "move", f"1 main {c2}")  # the second rank's resolve of main gets c2
    results = _two_ranks(tmp_path, "hf://org/dist-moving")
    for kind, message in results:
        assert kind == "DistributedError" and "different checkpoints" in message
    log = hub.stats()["log"]
    assert any(f"/resolve/{c1}/" in line for line in log) and any(f"/resolve/{c2}/" in line for line in log)


def test_a_cache_ringsafe_wrote_is_read_by_huggingface_hub_offline(hub, tmp_path):
    t, files = sharded(tmp_path, seed=3)
    files["config.json"] = '{"model_type": "none"}'
    commit = hub.add_repo("org/mine", files)
    same(rt.load_file("hf://org/mine", cache=True), t)
    assert ringsafe._ringsafe.fetch_file("hf://org/mine/config.json", cache=True).name == \
        f"hf://org/mine@{commit}/config.json"
    got = reference("""
        import json
        from huggingface_hub import hf_hub_download, snapshot_download
        names = ["model.safetensors.index.json", "model-00001-of-00002.safetensors",
                 "model-00002-of-00002.safetensors", "config.json"]
        print(json.dumps({"files": {n: hf_hub_download("org/mine", n) for n in names},
                          "snapshot": snapshot_download("org/mine")}))
    """, {"HF_HUB_OFFLINE": "1"})
    for name, p in got["files"].items():
        src = files[name]
        want = src.read_bytes() if isinstance(src, pathlib.Path) else src.encode()
        assert pathlib.Path(p).read_bytes() == want, name
        assert f"snapshots/{commit}/" in p
    assert got["snapshot"].endswith(f"snapshots/{commit}")
    blob_dir = tmp_path / "cache" / "models--org--mine" / "blobs"
    assert all(".ringsafe-" not in p.name and not p.name.endswith(".incomplete") for p in blob_dir.iterdir())


def test_a_cache_huggingface_hub_wrote_is_read_with_no_request(hub, tmp_path):
    t, path = checkpoint(tmp_path, seed=4)
    commit = hub.add_repo("org/theirs", {"model.safetensors": path})
    reference("""
        import json
        from huggingface_hub import hf_hub_download
        print(json.dumps(hf_hub_download("org/theirs", "model.safetensors")))
    """)
    before = hub.stats()["requests"]
    from ringsafe._source import open_source
    from ringsafe._mapped import MappedSource
    src = open_source("hf://org/theirs", "mmap", {})
    try:
        assert isinstance(src, MappedSource)  # read as a local file: the mmap backend
        assert src.reader.shards()[0].spec == f"hf://org/theirs@{commit}/model.safetensors"
        assert src.reader.shard_file(0).endswith(f"models--org--theirs/snapshots/{commit}/model.safetensors")
    finally:
        src.close()
    same(rt.load_file("hf://org/theirs"), t)
    same(rt.load_file("hf://org/theirs/model.safetensors", backend="pread"), t)
    assert hub.stats()["requests"] == before
    # Offline, a file that is not there is FileNotFoundError naming where it was looked for.
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with pytest.raises(FileNotFoundError, match="not in the Hub cache") as e:
            rt.load_file("hf://org/theirs/other.safetensors")
        assert e.value.filename.endswith(f"snapshots/{commit}/other.safetensors")
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    with pytest.raises(FileNotFoundError):
        rt.load_file("hf://org/never", local_files_only=True)
    assert hub.stats()["requests"] == before


def test_gated_repo_names_the_repo_and_never_the_token(hub, tmp_path):
    t, path = checkpoint(tmp_path, seed=5)
    hub.add_repo("org/gated-py", {"model.safetensors": path})
    hub.control("org/gated-py", "gated", "hf_py_right")
    with pytest.raises(ringsafe.SafetensorError, match="token is needed") as e:
        rt.load_file("hf://org/gated-py")
    assert "org/gated-py" in str(e.value) and "401" in str(e.value)
    with pytest.raises(ringsafe.SafetensorError) as e:
        rt.load_file("hf://org/gated-py", token="hf_py_WRONG_secret")
    assert "403" in str(e.value) and "hf_py_WRONG_secret" not in str(e.value)
    os.environ["HF_TOKEN"] = "hf_py_env_WRONG"
    try:
        with pytest.raises(ringsafe.SafetensorError) as e:
            rt.load_file("hf://org/gated-py")
        assert "HF_TOKEN" in str(e.value) and "hf_py_env_WRONG" not in str(e.value)
        same(rt.load_file("hf://org/gated-py", token="hf_py_right"), t)
    finally:
        del os.environ["HF_TOKEN"]
    token_file = tmp_path / "hf_home" / "token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text("hf_py_right\n")  # `hf auth login` leaves it there
    same(rt.load_file("hf://org/gated-py"), t)
    assert any(line.endswith(" auth") for line in hub.stats()["log"])


# ---------------------------------------------------------------- ringsafe.transformers

def _tiny_repo(hub, tmp_path, repo, arch, tie, seed=0, dtype=torch.bfloat16, shard="40KB"):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    if arch == "llama":
        cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                       tie_word_embeddings=tie)
        model = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                      tie_word_embeddings=tie)
        model = transformers.GPT2LMHeadModel(cfg)
    folder = tmp_path / f"{repo.replace('/', '_')}-{seed}"
    model.to(dtype).save_pretrained(folder, max_shard_size=shard)
    return hub.add_repo(repo, {p.name: p for p in folder.iterdir()}), folder


TRANSFORMERS_REFERENCE = """
    import json, sys, torch, transformers
    import safetensors.torch as st
    transformers.logging.set_verbosity_error()
    kw = {k: getattr(torch, v) if k == "dtype" else v for k, v in json.loads(sys.argv[1]).items()}
    m = transformers.AutoModelForCausalLM.from_pretrained(kw.pop("repo"), **kw)
    sd = {k: v.contiguous().clone() for k, v in m.state_dict().items()}
    st.save_file(sd, sys.argv[2])
    print(json.dumps({"class": type(m).__name__, "tied": m.get_output_embeddings().weight.data_ptr()
                      == m.get_input_embeddings().weight.data_ptr()}))
"""


def transformers_reference(tmp_path, repo, env=None, **kw):
    """transformers' own AutoModelForCausalLM.from_pretrained(repo, **kw) in a fresh process:
    ({"class", "tied"}, its state dict)."""
    import uuid
    out = tmp_path / f"reference-{uuid.uuid4().hex}.safetensors"
    code = textwrap.dedent(TRANSFORMERS_REFERENCE)
    args = json.dumps(dict(kw, repo=repo))
    res = subprocess.run([sys.executable, "-c", code, args, str(out)], capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})), timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), st.load_file(str(out))


@pytest.mark.parametrize("arch, tie, shard", [("llama", False, "40KB"), ("llama", True, "1GB"), ("gpt2", True, "40KB")],
                         ids=["llama-sharded", "llama-tied", "gpt2-sharded-tied"])
def test_from_pretrained_gives_transformers_state_dict(hub, tmp_path, arch, tie, shard):
    import ringsafe.transformers as rtf
    repo = f"org/{arch}-{int(tie)}-{shard}"
    _tiny_repo(hub, tmp_path, repo, arch, tie, shard=shard)
    info, ref = transformers_reference(tmp_path, repo, {"HF_HUB_CACHE": str(tmp_path / "ref-cache")}, dtype="bfloat16")
    before = hub.stats()["requests"]
    model = rtf.from_pretrained(f"hf://{repo}", dtype=torch.bfloat16)
    assert type(model).__name__ == info["class"]
    got = {k: v.contiguous() for k, v in model.state_dict().items()}
    same(got, ref)
    tied = model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert tied == info["tied"] == tie
    assert model.config.name_or_path == f"hf://{repo}"
    # Every file at one commit: only config.json asked for "main".
    log = hub.stats()["log"][before:]
    assert sum("/resolve/main/" in line for line in log) == 1
    assert not (tmp_path / "cache").exists()  # no disk copy
    x = torch.randint(0, 96, (1, 5))
    with torch.no_grad():
        assert model(x).logits.shape == (1, 5, 96)


def test_from_pretrained_pins_the_commit_of_config_json(hub, tmp_path):
    import ringsafe.transformers as rtf
    c1, f1 = _tiny_repo(hub, tmp_path, "org/moving-model", "llama", False, seed=1)
    c2, _ = _tiny_repo(hub, tmp_path, "org/moving-model", "llama", False, seed=2)  # main -> c2
    hub.control("org/moving-model", "refs/main", c1)
    hub.control("org/moving-model", "move", f"1 main {c2}")  # after config.json's resolve, main moves
    model = rtf.from_pretrained("hf://org/moving-model", dtype=torch.bfloat16)
    want = {}
    for shard in f1.glob("model-*.safetensors"):
        want.update(st.load_file(str(shard)))
    got = model.state_dict()
    for k, v in want.items():
        assert torch.equal(got[k], v), k
    assert not any(f"/resolve/{c2}/" in line for line in hub.stats()["log"])


def test_from_pretrained_cache_is_read_by_transformers_offline(hub, tmp_path):
    import ringsafe.transformers as rtf
    _tiny_repo(hub, tmp_path, "org/cached-model", "gpt2", True)
    model = rtf.from_pretrained("hf://org/cached-model", dtype=torch.bfloat16, cache=True)
    info, ref = transformers_reference(tmp_path, "org/cached-model", {"HF_HUB_OFFLINE": "1"}, dtype="bfloat16")
    same({k: v.contiguous() for k, v in model.state_dict().items()}, ref)
    # And ringsafe reads it back with no request.
    before = hub.stats()["requests"]
    again = rtf.from_pretrained("hf://org/cached-model", dtype=torch.bfloat16)
    same({k: v.contiguous() for k, v in again.state_dict().items()}, ref)
    assert hub.stats()["requests"] == before


def test_from_pretrained_refuses_unknown_model_types(hub, tmp_path):
    import ringsafe.transformers as rtf
    pytest.importorskip("transformers")
    hub.add_repo("org/custom", {"config.json": '{"model_type": "my-own-arch"}'})
    with pytest.raises(ValueError, match="never runs a repo's own code"):
        rtf.from_pretrained("hf://org/custom")


# ---------------------------------------------------------------- only verified bytes

@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    try:
        f = FaultServer(tmp_path_factory.mktemp("faults"))
    except ServerUnavailable as e:
        pytest.skip(str(e))
    yield f
    f.close()


def lying_repo(hub, faults, tmp_path, name):
    """A repo whose CDN (the fault server) serves the file's first two requests, then
    the bytes of another version under the same ETag: (tensors, sha256, arm), where
    arm() points the CDN afresh (its request count anew)."""
    import hashlib
    t = {f"layers.{i}.w": torch.full((256, 256), float(i), dtype=torch.bfloat16) for i in range(8)}
    good = st.save(t)
    n = int.from_bytes(good[:8], "little")
    other = good[:8 + n] + bytes(b ^ 0x5A for b in good[8 + n:])
    commit = hub.add_repo(name, {"model.safetensors": good})
    (hub.repo_dir(name) / "commits" / commit / "model.safetensors.other").write_bytes(other)
    rounds = iter(range(1000))

    def arm():
        hub.control(name, "cdn", f"{faults.url}/cdn?file={{file}}&fault=swap&other={{file}}.other&skip=2"
                                 f"&id={name.replace('/', '-')}-{next(rounds)}")
    return t, hashlib.sha256(good).hexdigest(), arm


SMALL_REQUESTS = {"connections": 4, "http_chunk": 64 << 10}


def test_a_cdn_that_swaps_the_bytes_under_one_etag_fails_the_load_naming_both_hashes(hub, faults, tmp_path):
    t, sha, arm = lying_repo(hub, faults, tmp_path, "org/py-mixed")
    url = "hf://org/py-mixed/model.safetensors"
    arm()
    with pytest.raises(ringsafe.SafetensorError) as e:
        rt.load_file(url, **SMALL_REQUESTS)
    assert sha in str(e.value) and "sha256" in str(e.value) and "X-Linked-Etag" in str(e.value)
    arm()
    mixed = rt.load_file(url, verify=False, **SMALL_REQUESTS)  # the opt-out: what the CDN served
    assert any(not torch.equal(mixed[k], t[k]) for k in t)
    for verify in (None, False):  # the cache checks whatever verify says
        arm()
        with pytest.raises(ringsafe.SafetensorError, match=sha):
            rt.load_file(url, cache=True, verify=verify, **SMALL_REQUESTS)
        assert not (tmp_path / "cache" / "models--org--py-mixed" / "snapshots").exists()
        assert not any((tmp_path / "cache" / "models--org--py-mixed" / "blobs").glob("*"))
    hub.control("org/py-mixed", "cdn", f"{faults.url}/cdn?file={{file}}&id=py-honest")
    same(rt.load_file(url, cache=True, **SMALL_REQUESTS), t)
    assert (tmp_path / "cache" / "models--org--py-mixed" / "blobs" / sha).is_file()


def test_an_empty_200_fails_and_leaves_nothing_in_the_cache(hub, tmp_path):
    t, path = checkpoint(tmp_path, seed=3)
    hub.add_repo("org/py-empty", {"model.safetensors": path})
    hub.control("org/py-empty", "empty", "1")
    with pytest.raises(ringsafe.SafetensorError, match="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"):
        rt.load_file("hf://org/py-empty", cache=True)
    assert not (tmp_path / "cache" / "models--org--py-empty" / "snapshots").exists()
    hub.control("org/py-empty", "empty", None)
    same(rt.load_file("hf://org/py-empty", cache=True), t)


def test_verify_true_rehashes_a_cached_blob_and_a_planted_one_is_not_read(hub, tmp_path):
    t, path = checkpoint(tmp_path, seed=4)
    commit = hub.add_repo("org/py-kept", {"model.safetensors": path})
    url = "hf://org/py-kept/model.safetensors"
    rt.load_file(url, cache=True)
    repo = tmp_path / "cache" / "models--org--py-kept"
    blob = next((repo / "blobs").iterdir())
    same(rt.load_file(url, local_files_only=True, verify=True), t)
    data = bytearray(blob.read_bytes())
    data[-5] ^= 1
    blob.write_bytes(bytes(data))
    for kw in ({"local_files_only": True}, {}):
        with pytest.raises(ringsafe.SafetensorError) as e:
            rt.load_file(url, verify=True, **kw)
        assert str(blob) in str(e.value) and blob.name in str(e.value)
    # A symlink at the blob's path to an outside file of the same size: not in the cache.
    outside = tmp_path / "outside.bin"
    outside.write_bytes(bytes(data))
    blob.unlink()
    blob.symlink_to(outside)
    with pytest.raises(FileNotFoundError):
        rt.load_file(url, local_files_only=True)
    same(rt.load_file(url, cache=True), t)  # fetched again, checked, the blob a file of its own
    assert not blob.is_symlink() and blob.read_bytes() == path.read_bytes()
    assert (repo / "snapshots" / commit / "model.safetensors").resolve() == blob.resolve()
    with pytest.raises(TypeError, match="verify"):
        rt.load_file(url, verify="yes")

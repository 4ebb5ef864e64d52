"""Sharded checkpoints (three shards and a ``model.safetensors.index.json``
weight_map, written with the reference ``safetensors``) read through the
index from a local directory, from nginx over http://, and from radosgw over
s3://: every tensor byte-identical to the reference's load of its shard,
keys() the union, select= globs across shards, and a weight_map naming a
missing shard refused with an error naming the index and the shard."""

import json
import os
import pathlib
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.torch as spt

from servers import nginx_server, radosgw_cluster, tls_ca  # noqa: F401 - pytest fixtures

BUCKET = "ringsafe-index"
INDEX = "model.safetensors.index.json"
SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
MISSING = "model-00004-of-00003.safetensors"


def raw(t):
    flat = t.detach().cpu().contiguous().reshape(-1)
    return str(t.dtype), tuple(t.shape), flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def assert_same(got, expected):
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert raw(got[name]) == raw(expected[name]), name


def shard_tensors():
    """Three shards of a toy model: layer tensors spread over all three."""
    g = torch.Generator().manual_seed(11)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return [
        {"embed.weight": r(512, 256),  # 512 KiB: larger than the opening probe
         "layers.0.attn.q": r(64, 64).to(torch.bfloat16),
         "layers.0.attn.k": r(64, 64).to(torch.bfloat16),
         "layers.0.mlp.up": r(64, 256).to(torch.float16)},
        {"layers.1.attn.q": r(64, 64).to(torch.bfloat16),
         "layers.1.mlp.up": r(64, 256).to(torch.float16),
         "layers.0.norm": r(64),
         "layers.1.norm": r(64),
         "step": torch.tensor(12345, dtype=torch.int64)},
        {"layers.2.attn.q": r(64, 64).to(torch.bfloat16),
         "layers.2.mlp.up": r(300, 256).to(torch.float16),
         "lm_head.weight": r(512, 256),
         "final.mask": torch.rand(33, generator=g) > 0.3},
    ]


def index_json(weight_map, total_size):
    return json.dumps({"metadata": {"total_size": total_size, "format": "pt"}, "weight_map": weight_map}, indent=2)


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory):
    """The sharded checkpoint on disk; also a broken index naming a shard that is not there."""
    d = tmp_path_factory.mktemp("sharded")
    weight_map, total = {}, 0
    for name, tensors in zip(SHARDS, shard_tensors()):
        spt.save_file(tensors, str(d / name), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = name
            total += t.numel() * t.element_size()
    (d / INDEX).write_text(index_json(weight_map, total))
    broken = dict(weight_map, ghost=MISSING)
    (d / "broken.safetensors.index.json").write_text(index_json(broken, total))
    # A map sending a tensor to a shard that exists but does not hold it.
    wrong = dict(weight_map)
    wrong["layers.0.norm"] = SHARDS[0]
    (d / "wrong.safetensors.index.json").write_text(index_json(wrong, total))
    return d


@pytest.fixture(scope="module")
def expected(local_dir):
    """Every tensor as the reference loads it from its shard; and {tensor: shard}."""
    out, where = {}, {}
    for name in SHARDS:
        for k, t in spt.load_file(str(local_dir / name)).items():
            out[k] = t
            where[k] = name
    return out, where


@pytest.fixture(scope="module")
def served(local_dir, nginx_server):
    d = nginx_server.root / "sharded"
    d.mkdir(exist_ok=True)
    for f in local_dir.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    return nginx_server


@pytest.fixture(scope="module")
def uploaded(local_dir, radosgw_cluster):
    assert radosgw_cluster.create_bucket(BUCKET) == 200
    for f in local_dir.iterdir():
        assert radosgw_cluster.put_object(BUCKET, "ckpt/" + f.name, f) == 200
    return radosgw_cluster


@pytest.fixture(params=["local", "http", "s3"])
def where(request, local_dir, monkeypatch):
    """A function from a file name of the checkpoint to its spec in this place."""
    if request.param == "local":
        return lambda name: str(local_dir / name)
    if request.param == "http":
        server = request.getfixturevalue("served")
        return lambda name: server.url("sharded/" + name)
    store = request.getfixturevalue("uploaded")
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    for k, v in store.env().items():
        monkeypatch.setenv(k, v)
    return lambda name: f"s3://{BUCKET}/ckpt/{name}"


# ---------------------------------------------------------------- reading through the index

def test_load_file_of_the_index_returns_every_tensor(where, expected):
    tensors, _ = expected
    assert_same(rpt.load_file(where(INDEX)), tensors)


def test_numpy_load_file_of_the_index(where, expected, local_dir):
    tensors, _ = expected
    names = [n for n, t in tensors.items() if t.dtype != torch.bfloat16]  # no NumPy type for BF16
    got = rnp.load_file(where(INDEX), select=names)
    assert sorted(got) == sorted(names)
    for name, shard in expected[1].items():
        if name in got:
            with safetensors.safe_open(str(local_dir / shard), "np") as ref:
                want = ref.get_tensor(name)
            assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
            assert got[name].tobytes() == want.tobytes(), name


def test_safe_open_of_the_index_is_the_union_of_the_shards(where, expected):
    tensors, shard_of = expected
    with ringsafe.safe_open(where(INDEX), "pt") as f:
        assert f.keys() == sorted(tensors)
        assert sorted(f.offset_keys()) == sorted(tensors)
        # Data order runs shard by shard.
        order = [SHARDS.index(shard_of[n]) for n in f.offset_keys()]
        assert order == sorted(order)
        assert f.metadata() == {"format": "pt"}  # the shards' common __metadata__, not the index's total_size
        for name in f.keys():
            assert raw(f.get_tensor(name)) == raw(tensors[name]), name
        assert_same(f.get_tensors(), tensors)
        # A slice of a tensor in the last shard.
        assert raw(f.get_slice("lm_head.weight")[500:503, 7:9]) == raw(tensors["lm_head.weight"][500:503, 7:9])


@pytest.mark.parametrize("select,want", [
    (["layers.*.attn.*"], ["layers.0.attn.k", "layers.0.attn.q", "layers.1.attn.q", "layers.2.attn.q"]),
    (["layers.?.mlp.up", "step"], ["layers.0.mlp.up", "layers.1.mlp.up", "layers.2.mlp.up", "step"]),
    (["*.weight"], ["embed.weight", "lm_head.weight"]),
    (["final.mask", "layers.0.norm"], ["final.mask", "layers.0.norm"]),
], ids=["attn-glob", "mlp-glob-and-name", "suffix-glob", "names"])
def test_select_globs_across_shards(where, expected, select, want):
    tensors, _ = expected
    assert_same(rpt.load_file(where(INDEX), select=select), {n: tensors[n] for n in want})
    with ringsafe.safe_open(where(INDEX), "pt", select=select) as f:
        assert f.keys() == want
        for n in want:
            assert raw(f.get_tensor(n)) == raw(tensors[n]), n
    streamed = {n: t.clone() for n, t in rpt.iter_tensors(where(INDEX), select=select, memory_limit=1 << 20)}
    assert_same(streamed, {n: tensors[n] for n in want})


def test_read_into_and_iter_tensors_through_the_index(where, expected):
    tensors, _ = expected
    dst = {n: torch.empty_like(tensors[n]) for n in ("embed.weight", "layers.1.norm", "final.mask", "step")}
    rpt.read_into(where(INDEX), dst)
    assert_same(dst, {n: tensors[n] for n in dst})
    got = {}
    for name, t in rpt.iter_tensors(where(INDEX), memory_limit=600 << 10):
        assert name not in got
        got[name] = t.clone()
    assert_same(got, tensors)


def test_a_selection_in_one_shard_reads_data_only_from_that_shard(served, expected):
    tensors, shard_of = expected
    want = [n for n in tensors if shard_of[n] == SHARDS[1]]
    mark = served.mark()
    assert_same(rpt.load_file(served.url("sharded/" + INDEX), select=want), {n: tensors[n] for n in want})
    per_file = {}
    for e in served.log(mark):
        per_file.setdefault(e.path.rsplit("/", 1)[-1], []).append(e)
    for shard in (SHARDS[0], SHARDS[2]):  # only their headers: one request each, from byte 0
        assert len(per_file[shard]) == 1, per_file[shard]
        assert per_file[shard][0].ranges[0][0] == 0
    assert len(per_file[SHARDS[1]]) > 1  # its header, then its tensors


# ---------------------------------------------------------------- refusals

def test_a_weight_map_naming_a_missing_shard_names_index_and_shard(where):
    spec = where("broken.safetensors.index.json")
    for call in (lambda: rpt.load_file(spec), lambda: ringsafe.safe_open(spec, "pt"),
                 lambda: rpt.iter_tensors(spec), lambda: rnp.load_file(spec, select=["step"])):
        with pytest.raises((ringsafe.SafetensorError, OSError)) as info:
            call()
        # A system error's str() is the reference's ('No such file or directory: NAME'); the
        # engine's message, naming the index and the shard, is its .detail.
        message = getattr(info.value, "detail", None) or str(info.value)
        assert spec in message
        assert MISSING in message
        if spec.startswith("/"):
            assert isinstance(info.value, FileNotFoundError)
            assert os.path.basename(info.value.filename) == MISSING  # the shard, not the index
        else:
            assert isinstance(info.value, ringsafe.SafetensorError) and info.value.kind == "HttpError"
            assert "404" in message


def test_a_weight_map_sending_a_tensor_to_the_wrong_shard_is_refused(where):
    spec = where("wrong.safetensors.index.json")
    with pytest.raises(ringsafe.SafetensorError) as info:
        rpt.load_file(spec)
    assert info.value.kind == "InvalidIndex"
    assert "'layers.0.norm'" in str(info.value)


def test_a_missing_index_names_it(where):
    spec = where("absent.safetensors.index.json")
    with pytest.raises((ringsafe.SafetensorError, OSError)) as info:
        rpt.load_file(spec)
    assert spec.rsplit("/", 1)[-1] in str(info.value)
    if spec.startswith("/"):
        assert isinstance(info.value, FileNotFoundError)

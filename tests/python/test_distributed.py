"""ringsafe.distributed: cooperative loading over torch.distributed (gloo on
127.0.0.1), with real processes (2, 3 and 4 of them), local files, nginx and
the project's fault server. Ranks compare what they got with the reference
``safetensors`` loading alone, byte for byte."""

import datetime
import os
import pathlib
import random
import re
import shutil
import socket
import subprocess
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import multiprocessing as mp  # noqa: E402

import ringsafe  # noqa: E402
import ringsafe.distributed as rd  # noqa: E402
from ringsafe.torch import save_file  # noqa: E402

PROBE = 256 << 10  # the engine's first Range request on open (http_options::prefetch)


# ---------------------------------------------------------------- worlds of processes

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ctx:
    """What a task sees in a worker: its rank and the groups made at start."""

    def __init__(self, rank, world, groups):
        self.rank, self.world, self.groups = rank, world, groups


def _worker(rank, world, port, conn, timeout_s):
    import torch.distributed as d
    d.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                         timeout=datetime.timedelta(seconds=timeout_s))
    groups = {"world": d.group.WORLD}
    if world == 4:  # every process takes part in making each group, members or not
        groups["trio"] = d.new_group([0, 2, 3], timeout=datetime.timedelta(seconds=timeout_s))
        groups["solo"] = d.new_group([2], timeout=datetime.timedelta(seconds=timeout_s))
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        fn, args = msg
        try:
            out = ("ok", fn(Ctx(rank, world, groups), *args))
        except BaseException as e:  # reported to the test, which asserts on it
            out = ("err", type(e).__name__, getattr(e, "kind", None), str(e), getattr(e, "incomplete", None),
                   getattr(e, "rank", None))
        conn.send(out)
    d.destroy_process_group()


class World:
    """N processes in one gloo process group, running test tasks on command."""

    def __init__(self, n, timeout_s=30):
        ctx = mp.get_context("spawn")
        port = _free_port()
        self.n, self.conns, self.procs = n, [], []
        for r in range(n):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(r, n, port, b, timeout_s), daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)
        for r, c in enumerate(self.conns):
            if not c.poll(120):
                self.close()
                raise RuntimeError(f"rank {r} did not start")
            assert c.recv() == "ready"

    def send(self, fn, *args):
        for c in self.conns:
            c.send((fn, args))

    def collect(self, timeout=90, ranks=None):
        out = []
        for r in (range(self.n) if ranks is None else ranks):
            c = self.conns[r]
            assert c.poll(timeout), f"rank {r} hung: no answer in {timeout} s"
            out.append(c.recv())
        return out

    def run(self, fn, *args, timeout=90):
        self.send(fn, *args)
        return self.collect(timeout)

    def close(self):
        for c, p in zip(self.conns, self.procs):
            if p.is_alive():
                try:
                    c.send(None)
                except OSError:
                    pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()


def ok(results):
    """The values of results that must all have succeeded."""
    for r, res in enumerate(results):
        assert res[0] == "ok", f"rank {r}: {res}"
    return [res[1] for res in results]


@pytest.fixture(scope="module")
def world4():
    w = World(4)
    yield w
    w.close()


@pytest.fixture(scope="module")
def world2():
    w = World(2)
    yield w
    w.close()


# ---------------------------------------------------------------- checkpoints

def _tensors(seed, big_rows=700):
    g = torch.Generator().manual_seed(seed)
    t = {
        "embed.weight": torch.randn(big_rows, 256, generator=g),                    # ~700 KiB: cut between ranks
        "layers.0.attn.q.weight": torch.randn(96, 64, generator=g).to(torch.bfloat16),
        "layers.0.attn.o.weight": torch.randn(64, 96, generator=g).to(torch.float16),
        "layers.0.mlp.up.weight": torch.randn(128, 64, generator=g),
        "layers.0.mlp.down.weight": torch.randn(64, 128, generator=g),
        "layers.0.norm.weight": torch.randn(64, generator=g),
        "cube": torch.randn(5, 6, 8, generator=g).to(torch.float64),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
        "ids": torch.randint(-128, 127, (1001,), dtype=torch.int8, generator=g),
        "mask": torch.rand(37, 3, generator=g) > 0.5,
        "i64": torch.randint(-(1 << 40), 1 << 40, (3, 5), generator=g),
        "fp4": torch.randint(0, 256, (6, 4), dtype=torch.uint8, generator=g).view(torch.float4_e2m1fn_x2),
    }
    return t


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    os.chmod(d, 0o755)
    paths = {}
    paths["model"] = d / "model.safetensors"
    save_file(_tensors(1), paths["model"], metadata={"format": "pt"})
    # The same tensors in two shards behind an index.
    t = _tensors(1)
    names = sorted(t)
    shard_a = {n: t[n] for n in names[: len(names) // 2]}
    shard_b = {n: t[n] for n in names[len(names) // 2:]}
    save_file(shard_a, d / "model-00001-of-00002.safetensors")
    save_file(shard_b, d / "model-00002-of-00002.safetensors")
    import json
    index = {"metadata": {}, "weight_map": {**{n: "model-00001-of-00002.safetensors" for n in shard_a},
                                            **{n: "model-00002-of-00002.safetensors" for n in shard_b}}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    paths["index"] = d / "model.safetensors.index.json"
    # One large tensor behind small ones (several batches; a tensor spanning them).
    g = torch.Generator().manual_seed(7)
    save_file({"a.small": torch.randn(100, generator=g), "b.small": torch.randn(50, 3, generator=g),
               "z.big": torch.randn(1024, 1024, generator=g)}, d / "big.safetensors")
    paths["big"] = d / "big.safetensors"
    save_file(_tensors(2), d / "other.safetensors")
    paths["other"] = d / "other.safetensors"
    # Tensors at offsets their dtypes do not divide (ringsafe's Writer keeps the order given).
    with ringsafe.Writer(d / "unaligned.safetensors") as w:
        for n, t in _tensors(3).items():
            if n == "fp4":
                continue
            w.write("x." + n, torch.arange(3, dtype=torch.uint8))
            w.write(n, t)
    paths["unaligned"] = d / "unaligned.safetensors"
    for p in d.iterdir():
        os.chmod(p, 0o644)
    return {k: str(v) for k, v in paths.items()}


# ---------------------------------------------------------------- servers

class Nginx:
    def __init__(self, root, prefix):
        self.prefix = pathlib.Path(prefix)
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        p = self.prefix
        user = "user root root;\n" if os.geteuid() == 0 else ""
        conf = f"""{user}worker_processes 2;
pid {p}/nginx.pid;
error_log {p}/error.log;
events {{ worker_connections 512; }}
http {{
  client_body_temp_path {p}/tmp/body; proxy_temp_path {p}/tmp/proxy; fastcgi_temp_path {p}/tmp/fcgi;
  uwsgi_temp_path {p}/tmp/uwsgi; scgi_temp_path {p}/tmp/scgi;
  log_format rs '$connection $status "$uri" "$http_range" $body_bytes_sent';
  access_log {p}/access.log rs;
  default_type application/octet-stream;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{self.port};
    root {root};
    location /slow/ {{ alias {root}/; limit_rate 128k; }}
  }}
}}
"""
        (p / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(["nginx", "-p", str(p), "-c", str(p / "nginx.conf"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=open(p / "stderr.log", "wb"))
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("nginx did not start: " + (p / "stderr.log").read_text())
                time.sleep(0.05)

    def url(self, name, slow=False):
        return f"http://127.0.0.1:{self.port}/{'slow/' if slow else ''}{name}"

    def log_lines(self, settle=True):
        path = self.prefix / "access.log"
        if not settle:
            return path.read_text().splitlines() if path.exists() else []
        last = None
        for _ in range(100):  # settled: nothing new for 50 ms
            lines = path.read_text().splitlines() if path.exists() else []
            if lines == last:
                return lines
            last = lines
            time.sleep(0.05)
        return last

    def requests(self, since, uri, settle=True):
        """(first, last, body bytes) of each logged Range request for ``uri`` after line ``since``."""
        out = []
        for line in self.log_lines(settle)[since:]:
            m = re.match(r'(\d+) (\d+) "([^"]*)" "bytes=(\d+)-(\d+)" (\d+)', line)
            assert m, f"unexpected access log line: {line}"
            if m.group(3) == uri:
                assert m.group(2) == "206", line
                out.append((int(m.group(4)), int(m.group(5)), int(m.group(6))))
        return out

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def nginx(files, tmp_path_factory):
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed")
    root = pathlib.Path(files["model"]).parent
    n = Nginx(root, tmp_path_factory.mktemp("nginx"))
    yield n
    n.close()


def _fault_server_path():
    exe = os.environ.get("RINGSAFE_FAULT_SERVER")
    if exe:
        return exe
    # <build>/engine/python/ringsafe/__init__.py -> <build>/tests/support/fault_server
    return str(pathlib.Path(ringsafe.__file__).resolve().parents[3] / "tests" / "support" / "fault_server")


@pytest.fixture(scope="module")
def fault_server():
    exe = _fault_server_path()
    if not os.access(exe, os.X_OK):
        pytest.skip(f"the fault server is not built ({exe})")
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    port = int(line.split()[1])
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


# ---------------------------------------------------------------- tasks (run in the workers)

def _raw(t):
    """The bytes of a tensor (any dtype, F4 included, any strides)."""
    if t.element_size() == 1:
        t = t.view(torch.uint8)
    return t.contiguous().reshape(-1).view(torch.uint8)


def _expected(path, part=None, rank=0, world=1):
    """What this rank must get: the reference safetensors loading alone, sliced as the shard asks."""
    import safetensors.torch
    if path.endswith(".index.json"):
        import json
        shards = set(json.loads(pathlib.Path(path).read_text())["weight_map"].values())
        whole = {}
        for name in shards:
            whole.update(safetensors.torch.load_file(str(pathlib.Path(path).parent / name)))
    else:
        whole = safetensors.torch.load_file(path)
    if part is None:
        return whole
    out = {}
    for n, t in whole.items():
        spec = part(n, list(t.shape), rank, world)
        if isinstance(spec, int):
            t = torch.tensor_split(t, world, dim=spec)[rank]
        elif spec is not None:
            t = t[tuple(slice(a, b) for a, b in spec)]
        out[n] = t
    return out


def _diff(got, exp):
    """Names whose dtype, shape or bytes differ, plus names missing/extra."""
    bad = sorted(set(got) ^ set(exp))
    for n in set(got) & set(exp):
        g, e = got[n], exp[n]
        if g.dtype != e.dtype or g.shape != e.shape or not torch.equal(_raw(g), _raw(e)):
            bad.append(n)
    return bad


def _tp_spec(name, shape, rank, world):
    """A tensor-parallel layout: dims, negative dims, explicit boxes, replicated tensors."""
    if name.endswith("q.weight") or name.endswith("up.weight") or name == "embed.weight":
        return 0                      # column parallel: whole rows, contiguous per rank
    if name.endswith("o.weight") or name.endswith("down.weight"):
        return 1                      # row parallel: strided boxes
    if name == "cube":
        return -1
    if name == "fp4":
        return 1                      # F4: the split keeps whole bytes
    if name == "i64":                 # an explicit box that overlaps between ranks
        return [(rank % 2, 3), (0, 5 - rank % 3)]
    return None


def task_load(ctx, path, group_name, memory_limit, use_tp, select_mode, options, ref=None):
    group = ctx.groups[group_name]
    if dist.get_rank(group) < 0:
        return None
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if select_mode == "nothing_on_1":
        select = [] if rank == 1 else None
    elif select_mode == "stages":
        select = ["layers.*"] if rank % 2 else ["embed.weight", "scalar", "cube"]
    else:
        select = None
    shard = (lambda n, s: _tp_spec(n, s, rank, world)) if use_tp else None
    stats = {}
    got = rd.load_file(path, group, select=select, shard=shard, memory_limit=memory_limit, stats=stats, **options)
    exp = _expected(ref or path, _tp_spec if use_tp else None, rank, world)
    if select is not None:
        import fnmatch
        exp = {n: t for n, t in exp.items() if any(fnmatch.fnmatchcase(n, p) for p in select)}
    return {"bad": _diff(got, exp), "stats": stats, "names": sorted(got)}


def task_reload(ctx, path):
    """Loads twice; returns the arena-cache hits of the second load and whether it matched."""
    import gc
    group = ctx.groups["world"]
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    first = rd.load_file(path, group)
    del first
    gc.collect()
    before = ringsafe.arena_cache_stats()["hits"]
    again = rd.load_file(path, group)
    hits = ringsafe.arena_cache_stats()["hits"] - before
    return hits, _diff(again, _expected(path, None, rank, world)) == []


def test_a_second_load_reuses_the_first_loads_memory(world2, files):
    # CPU destinations come from the arena cache, as local loads' do: a process
    # that loads again gets the pages it already faulted in back.
    for hits, same in ok(world2.run(task_reload, files["model"])):
        assert same
        assert hits >= 1


def _data_bytes(path):
    """Bytes of tensor data in the checkpoint (what one copy of it costs)."""
    r = ringsafe.Reader(path)
    try:
        return sum(t.nbytes for t in r.tensors())
    finally:
        r.close()


# ---------------------------------------------------------------- tests: whole checkpoints

@pytest.mark.parametrize("memory_limit", [1 << 30, 96 << 10])
def test_every_rank_gets_the_whole_checkpoint_byte_for_byte_4_ranks(world4, files, memory_limit):
    res = ok(world4.run(task_load, files["model"], "world", memory_limit, False, None, {}))
    for r in res:
        assert r["bad"] == []
        assert r["stats"]["staging_peak"] <= memory_limit
        assert r["stats"]["layout"] == "image"  # in place as the file holds them: no staging at all
        assert r["stats"]["staging_peak"] == 0
    # Each byte fetched once: the ranks' fetches add up to the data, shares balanced.
    fetched = [r["stats"]["fetched_bytes"] for r in res]
    assert sum(fetched) == _data_bytes(files["model"])
    assert max(fetched) <= 1.1 * sum(fetched) / 4
    if memory_limit < 1 << 20:  # the 700 KiB tensor is larger than the limit: it went in batches
        assert res[0]["stats"]["batches"] > 3


def test_two_processes_and_subgroups_of_one_and_three(world2, world4, files):
    res = ok(world2.run(task_load, files["model"], "world", 1 << 20, False, None, {}))
    assert [r["bad"] for r in res] == [[], []]
    assert sum(r["stats"]["fetched_bytes"] for r in res) == _data_bytes(files["model"])
    # A group that is not the world (ranks 0, 2, 3) and one of a single rank; the others take no part.
    res = ok(world4.run(task_load, files["model"], "trio", 128 << 10, False, None, {}))
    assert res[1] is None and all(res[r]["bad"] == [] for r in (0, 2, 3))
    assert sum(res[r]["stats"]["fetched_bytes"] for r in (0, 2, 3)) == _data_bytes(files["model"])
    res = ok(world4.run(task_load, files["model"], "solo", 1 << 20, True, None, {}))
    assert res[2]["bad"] == [] and [res[r] for r in (0, 1, 3)] == [None] * 3


@pytest.mark.parametrize("memory_limit", [1 << 30, 48 << 10])
def test_unaligned_tensors_go_through_staging(world4, files, memory_limit):
    res = ok(world4.run(task_load, files["unaligned"], "world", memory_limit, False, None, {}))
    for r in res:
        assert r["bad"] == []
        assert r["stats"]["layout"] == "packed" and 0 < r["stats"]["staging_peak"] <= memory_limit
    assert sum(r["stats"]["fetched_bytes"] for r in res) == _data_bytes(files["unaligned"])


def test_sharded_index(world4, files):
    res = ok(world4.run(task_load, files["index"], "world", 64 << 10, False, None, {}))
    assert all(r["bad"] == [] for r in res)
    assert sum(r["stats"]["fetched_bytes"] for r in res) == _data_bytes(files["model"])


# ---------------------------------------------------------------- tests: tensor parallel and selections

@pytest.mark.parametrize("memory_limit", [1 << 30, 64 << 10])
def test_tensor_parallel_shares(world4, files, memory_limit):
    res = ok(world4.run(task_load, files["model"], "world", memory_limit, True, None, {}))
    for r in res:
        assert r["bad"] == []
        assert r["stats"]["staging_peak"] <= memory_limit
    # Everything is needed by someone: fetched once in total. Column-parallel parts are
    # fetched by the rank that needs them, so less is exchanged than fetched.
    assert sum(r["stats"]["fetched_bytes"] for r in res) == _data_bytes(files["model"])
    assert sum(r["stats"]["received_bytes"] for r in res) < sum(r["stats"]["fetched_bytes"] for r in res)
    assert any(r["stats"]["all_to_alls"] for r in res)


def test_ranks_that_need_nothing_and_pipeline_stages(world4, files):
    res = ok(world4.run(task_load, files["model"], "world", 128 << 10, False, "nothing_on_1", {}))
    assert [r["bad"] for r in res] == [[]] * 4
    assert res[1]["names"] == [] and res[1]["stats"]["fetched_bytes"] > 0  # it still fetches its share
    res = ok(world4.run(task_load, files["model"], "world", 1 << 30, True, "stages", {}))
    assert [r["bad"] for r in res] == [[]] * 4
    assert res[0]["names"] == ["cube", "embed.weight", "scalar"]


# ---------------------------------------------------------------- tests: over HTTP, each range once

def _check_ranges_once(reqs, ranks, size, data_start):
    """The load's Range requests cover [data_start, size) exactly once; the only other
    requests are the ranks' header probes (one each, from byte 0)."""
    probes = [q for q in reqs if q[0] == 0 and q[1] == PROBE - 1]
    assert len(probes) == ranks, reqs
    data = sorted(reqs)
    for q in probes:
        data.remove(q)
    pos = data_start
    for first, last, body in data:
        assert first == pos, f"bytes {pos}..{first - 1} never requested, or requested twice: {data}"
        assert body == last - first + 1
        pos = last + 1
    assert pos == size


def _data_start(path):
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


def test_over_nginx_each_byte_range_requested_once(world4, files, nginx):
    name = "big.safetensors"
    since = len(nginx.log_lines())
    opts = {"http_chunk": 256 << 10, "connections": 4}
    res = ok(world4.run(task_load, nginx.url(name), "world", 1 << 30, False, None, opts, files["big"]))
    assert all(r["bad"] == [] for r in res), [r["bad"] for r in res]
    size = os.path.getsize(files["big"])
    reqs = nginx.requests(since, "/" + name)
    _check_ranges_once(reqs, 4, size, _data_start(files["big"]))
    # Every rank fetched about a quarter.
    fetched = [r["stats"]["fetched_bytes"] for r in res]
    assert max(fetched) <= 1.1 * (size - _data_start(files["big"])) / 4


def test_over_nginx_tensor_parallel_once(world2, files, nginx):
    name = "model.safetensors"
    since = len(nginx.log_lines())
    res = ok(world2.run(task_load, nginx.url(name), "world", 64 << 10, True, None, {"http_chunk": 64 << 10},
                          files["model"]))
    assert all(r["bad"] == [] for r in res)
    _check_ranges_once(nginx.requests(since, "/" + name), 2, os.path.getsize(files["model"]),
                       _data_start(files["model"]))


# ---------------------------------------------------------------- tests: failures

def task_fail_one_rank(ctx, base, path, bad_rank, fault, memory_limit):
    rank = dist.get_rank()
    url = f"{base}/m.safetensors?file={path}&id=r{rank}-{fault}"
    if rank == bad_rank:
        url += f"&{fault}"
    return rd.load_file(url, memory_limit=memory_limit, max_attempts=1, http_chunk=64 << 10) and "loaded"


def test_a_failing_fetch_raises_the_same_error_on_every_rank(world4, files, fault_server):
    res = world4.run(task_fail_one_rank, fault_server, files["model"], 2, "fault=reset&after=0&skip=1", 1 << 30)
    assert all(r[0] == "err" for r in res), res
    kinds = {(r[1], r[2], r[3], r[5]) for r in res}
    assert len(kinds) == 1, res  # the same error, word for word, everywhere
    cls, kind, msg, rank = kinds.pop()
    assert cls == "SafetensorError" and kind == "HttpError" and rank == 2
    assert msg.startswith("rank 2 of 4: fetching bytes ")
    assert "id=r2-fault=reset" in msg                      # the file
    assert re.search(r"bytes \d+-\d+ of http", msg)        # the offset
    # The group is still in step: a load right after works.
    res = ok(world4.run(task_load, files["model"], "world", 1 << 20, False, None, {}))
    assert all(r["bad"] == [] for r in res)


def task_open(ctx, paths):
    return rd.load_file(paths[dist.get_rank()]) and "loaded"


def test_an_error_before_any_fetch_raises_everywhere(world4, files, tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    paths = [files["model"], missing, files["model"], files["model"]]
    res = world4.run(task_open, paths)
    assert {r[1] for r in res} == {"FileNotFoundError"}, res
    assert len({r[3] for r in res}) == 1 and res[0][3].startswith("rank 1 of 4: ") and "nope.safetensors" in res[0][3]
    # Different checkpoints on different ranks are refused, not mixed.
    paths = [files["model"], files["model"], files["other"], files["model"]]
    res = world4.run(task_open, paths)
    assert all(r[0] == "err" and r[2] == "DistributedError" and "different checkpoints" in r[3] for r in res), res


def test_ranks_may_open_copies_at_different_paths(world4, files, tmp_path):
    # The ranks compare headers, not paths: each rank's own copy (a local mirror) is the same checkpoint.
    copies = []
    for r in range(4):
        (tmp_path / f"rank{r}").mkdir()
        copies.append(shutil.copy(files["model"], tmp_path / f"rank{r}" / "model.safetensors"))
    assert ok(world4.run(task_open, [str(c) for c in copies])) == ["loaded"] * 4


def test_the_ranks_digest_counts_an_hf_shards_spec_and_no_other_spec():
    # What the ranks compare (_dist_run._digest): every shard's size and data_start and every
    # tensor's record; the spec only for hf:// shards, where it names the commit read.
    from ringsafe._dist_plan import _Tensor
    from ringsafe._dist_run import _digest
    from ringsafe._ringsafe import ShardInfo, TensorInfo

    tensors = [_Tensor(TensorInfo(name="w", dtype="F32", shape=[2], begin=0, end=8), 0)]

    def digest(spec, size=100, data_start=40, ts=tensors):
        return _digest([ShardInfo(spec=spec, size=size, data_start=data_start)], ts)

    assert digest("/a/m.safetensors") == digest("/mirror/m.safetensors") == digest("https://h/m.safetensors")
    assert digest("/a/m.safetensors") != digest("/a/m.safetensors", size=101)
    assert digest("/a/m.safetensors") != digest("/a/m.safetensors", data_start=48)
    assert digest("hf://o/r@c1/m.safetensors") == digest("hf://o/r@c1/m.safetensors")
    assert digest("hf://o/r@c1/m.safetensors") != digest("hf://o/r@c2/m.safetensors")
    other = [_Tensor(TensorInfo(name="w", dtype="F16", shape=[4], begin=0, end=8), 0)]
    assert digest("/a/m.safetensors") != digest("/a/m.safetensors", ts=other)


def test_what_crosses_between_ranks_and_stages_is_records():
    # The payloads of the object collectives are frozen records, read by name, that pickle;
    # the planner (pure computation) imports no framework.
    import ast
    import dataclasses
    import pickle
    from ringsafe import _dist_plan
    from ringsafe._dist_exchange import _describe, _ErrorDescription
    from ringsafe._dist_run import _Opened

    desc = _describe(FileNotFoundError(2, "No such file or directory", "/x/m.safetensors"), "fetching bytes 0-9")
    assert desc == _ErrorDescription("FileNotFoundError", None, 2, "No such file or directory: '/x/m.safetensors'",
                                     "fetching bytes 0-9")
    opened = _Opened("d1", {"w": [(0, 2)]}, True)
    for record in (desc, opened, _Opened(error=desc)):
        assert pickle.loads(pickle.dumps(record)) == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        desc.message = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        desc[3]
    assert _describe(KeyboardInterrupt()).kind == "Cancelled" and _describe(KeyboardInterrupt()).context == ""
    assert [m.name for m in _dist_plan._Mode] == ["SKIP", "LOCAL", "BCAST1", "BCASTP", "A2A"]
    tree = ast.parse(pathlib.Path(_dist_plan.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
               {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and ("torch" in m or "adapter" in m) for m in imported), imported
    front = pathlib.Path(rd.__file__).read_text()
    assert "ADAPTER._" not in front


def task_read_into_sentinel(ctx, base, path, bad_rank, skip, memory_limit):
    rank = dist.get_rank()
    url = f"{base}/m.safetensors?file={path}&id=ri{rank}-{skip}"
    if rank == bad_rank:
        url += f"&fault=reset&after=0&skip={skip}"
    exp = _expected(path)
    dst = {n: torch.empty_like(t) for n, t in exp.items()}
    for t in dst.values():
        _raw(t).fill_(0xA5)
    sentinel = {n: _raw(t).clone() for n, t in dst.items()}
    try:
        rd.read_into(url, dst, memory_limit=memory_limit, max_attempts=1, http_chunk=1 << 30)
        return ("loaded", [])
    except ringsafe.SafetensorError as e:
        wrong = []
        for n, t in dst.items():
            if n in e.incomplete:
                continue
            if not (torch.equal(_raw(t), sentinel[n]) or torch.equal(_raw(t), _raw(exp[n]))):
                wrong.append(n)
        complete = sorted(n for n in dst if torch.equal(_raw(dst[n]), _raw(exp[n])))
        return (str(e), wrong, sorted(e.incomplete), complete)


def test_nothing_half_written_that_the_error_does_not_name(world4, files, fault_server):
    # Rank 3 fails at its second data request (batch 2); "z.big" spans the batches.
    res = ok(world4.run(task_read_into_sentinel, fault_server, files["big"], 3, 2, 2 << 20))
    for msg, wrong, incomplete, complete in res:
        assert wrong == []
        assert incomplete == ["z.big"] and "z.big" in msg
        assert "a.small" in complete and "b.small" in complete
    assert len({m.split("; on rank")[0] for m, *_ in res}) == 1
    assert res[0][0].startswith("rank 3 of 4: fetching bytes")


def task_load_slow(ctx, url):
    try:
        rd.load_file(url, memory_limit=256 << 10, http_chunk=32 << 10, connections=4)
        return "loaded"
    except Exception as e:
        return (type(e).__name__, getattr(e, "kind", None), str(e))


def test_a_rank_killed_mid_load_makes_the_others_raise(files, nginx):
    w = World(3, timeout_s=20)
    try:
        name = "big.safetensors"
        since = len(nginx.log_lines())
        started = time.monotonic()
        w.send(task_load_slow, nginx.url(name, slow=True))
        while len(nginx.requests(since, "/slow/" + name, settle=False)) < 3 + 3:  # probes, then data
            assert time.monotonic() - started < 30, "the load did not start"
            time.sleep(0.05)
        w.procs[1].kill()
        res = w.collect(timeout=60, ranks=[0, 2])
        elapsed = time.monotonic() - started
        for r in res:
            assert r[0] == "ok" and r[1] != "loaded", res
            cls, kind, msg = r[1]
            assert cls == "SafetensorError" and kind == "DistributedError", r
            assert "another rank died" in msg
        assert elapsed < 50
    finally:
        w.close()


# ---------------------------------------------------------------- tests: what a load leaves behind

def _threads():
    """(threads gloo started, all threads) of this process, by their names in /proc."""
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            names.append(pathlib.Path(f"/proc/self/task/{t}/comm").read_text().strip())
        except OSError:  # it ended meanwhile
            pass
    return sorted(n for n in names if "gloo" in n), len(names)


def _threads_settled(before, patience_s=10):
    """_threads() once it is back to ``before`` (at most ``patience_s`` of waiting): a
    thread that was joined leaves /proc a moment after its join returned. A thread that
    is still running stays, however long one waits."""
    deadline = time.monotonic() + patience_s
    now = _threads()
    while (now[0] != before[0] or now[1] > before[1]) and time.monotonic() < deadline:
        time.sleep(0.01)
        now = _threads()
    return now


def task_group_freed(ctx, warm, cases):
    """Per case (a spec per rank): loads it with a new group, destroys the group, and
    returns (the load's outcome, types of the group's referrers, threads before, after).
    The cyclic collector is off: only reference counts may free the group."""
    import gc
    gc.disable()
    try:
        rd.load_file(warm)  # ringsafe's own threads (call threads, the ring pool) exist before counting
        out = []
        for specs in cases:
            before = _threads()
            pg = dist.new_group(list(range(ctx.world)))
            try:
                outcome = rd.load_file(specs[ctx.rank], pg, max_attempts=1) and "loaded"
            except Exception as e:
                outcome = type(e).__name__
            dist.destroy_process_group(pg)
            referrers = sorted({type(r).__name__ for r in gc.get_referrers(pg)} - {"frame"})
            del pg
            out.append((outcome, referrers, before, _threads_settled(before)))
        return out
    finally:
        gc.enable()


def _check_freed(results, outcomes):
    for rank, res in enumerate(ok(results)):
        for (outcome, referrers, before, after), want in zip(res, outcomes):
            assert outcome == want, (rank, res)
            assert "_Group" not in referrers, (rank, outcome, referrers)
            assert referrers == [], (rank, outcome, referrers)
            assert after[0] == before[0], f"rank {rank}, {outcome}: gloo threads {before[0]} -> {after[0]}"
            assert after[1] <= before[1], f"rank {rank}, {outcome}: threads {before[1]} -> {after[1]}"


def test_destroy_process_group_after_a_load_frees_the_backend(world2, files, tmp_path):
    # A load keeps no reference to its group: destroy_process_group ends gloo's threads at once.
    missing = str(tmp_path / "nope.safetensors")
    cases = [[files["model"]] * 2, [files["index"]] * 2, [files["model"], missing]]
    _check_freed(world2.run(task_group_freed, files["model"], cases), ["loaded", "loaded", "FileNotFoundError"])


def test_a_failed_fetch_leaves_no_reference_to_the_group(world2, files, fault_server):
    base = f"{fault_server}/m.safetensors?file={files['model']}"
    cases = [[f"{base}&id=free0", f"{base}&id=free1&fault=reset&after=0&skip=1"]]
    _check_freed(world2.run(task_group_freed, files["model"], cases), ["SafetensorError"])


# ---------------------------------------------------------------- tests: models

def task_load_model(ctx, path, strict_break_rank):
    rank, world = dist.get_rank(), dist.get_world_size()
    hidden, inner = 64, 128
    model = torch.nn.Module()
    model.up = torch.nn.Linear(hidden, inner // world)           # column parallel
    model.down = torch.nn.Linear(inner // world, hidden)         # row parallel (bias replicated)
    model.norm = torch.nn.LayerNorm(hidden)
    if rank == strict_break_rank:
        model.extra = torch.nn.Linear(2, 2)
    shard = {"up.*": 0, "down.weight": 1}
    missing, unexpected = rd.load_model(model, path, shard=shard, memory_limit=64 << 10)
    full = _expected(path)
    exp = {"up.weight": torch.tensor_split(full["up.weight"], world, 0)[rank],
           "up.bias": torch.tensor_split(full["up.bias"], world, 0)[rank],
           "down.weight": torch.tensor_split(full["down.weight"], world, 1)[rank],
           "down.bias": full["down.bias"], "norm.weight": full["norm.weight"], "norm.bias": full["norm.bias"]}
    state = model.state_dict()
    return _diff({k: state[k] for k in exp}, exp) + sorted(missing) + sorted(unexpected)


def test_load_model_tensor_parallel(world4, files, tmp_path):
    g = torch.Generator().manual_seed(3)
    full = torch.nn.Module()
    full.up, full.down, full.norm = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64), torch.nn.LayerNorm(64)
    with torch.no_grad():
        for p in full.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    path = tmp_path / "tp.safetensors"
    ringsafe.torch.save_model(full, path)
    assert ok(world4.run(task_load_model, str(path), -1)) == [[]] * 4
    # One rank's model does not match: every rank raises, before any byte is fetched.
    res = world4.run(task_load_model, str(path), 2)
    assert all(r[1] == "RuntimeError" and r[3].startswith("rank 2 of 4: ") and "extra.weight" in r[3]
               for r in res), res


# ---------------------------------------------------------------- the planner, for any world size

def _random_case(rng):
    from ringsafe._ringsafe import TensorInfo
    from ringsafe.distributed import _Tensor
    tensors, begin = [], 0
    for i in range(rng.randint(1, 6)):
        dtype, bits = rng.choice([("F32", 32), ("BF16", 16), ("U8", 8), ("F4", 4), ("F64", 64)])
        nd = rng.randint(0, 3)
        shape = [rng.randint(1, 9) for _ in range(nd)]
        if dtype == "F4":
            if not shape:
                shape = [2]
            shape[-1] *= 2
        n = 1
        for s in shape:
            n *= s
        nbytes = n * bits // 8
        tensors.append(_Tensor(TensorInfo(name=f"t{i}", dtype=dtype, shape=shape, begin=begin, end=begin + nbytes), i))
        begin += nbytes
    world = rng.randint(1, 7)
    needs = []
    for r in range(world):
        mine = {}
        for t in tensors:
            if rng.random() < 0.25:
                continue
            box = []
            for d, n in enumerate(t.eshape):
                g = t.granule if d == len(t.eshape) - 1 else 1
                a, b = sorted(rng.randint(0, n // g) * g for _ in range(2))
                box.append((0, n) if rng.random() < 0.4 else (a, b))
            mine[t.info.name] = box
        needs.append(mine)
    return tensors, needs, world


def _elements(box, eshape):
    import itertools
    strides = [1] * len(eshape)
    for i in range(len(eshape) - 2, -1, -1):
        strides[i] = strides[i + 1] * eshape[i + 1]
    return {sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*[range(a, b) for a, b in box])}


def test_plan_fetches_every_needed_byte_once_balanced_for_any_world_size():
    from ringsafe.distributed import _BALANCE_SLACK, _flat_interval, plan
    rng = random.Random(12345)
    for case in range(400):
        tensors, needs, world = _random_case(rng)
        batch_bytes = rng.choice([4, 16, 64, 1 << 20])
        batches = plan(tensors, needs, world=world, batch_bytes=batch_bytes)
        assert [[(u.t.info.name, u.box, u.owner) for u in b.units] for b in batches] == \
               [[(u.t.info.name, u.box, u.owner) for u in b.units] for b in plan(tensors, needs, world=world, batch_bytes=batch_bytes)]
        fetched = {t.info.name: [] for t in tensors}
        load = [0] * world
        for b in batches:
            per_rank = [0] * world
            for u in b.units:
                fetched[u.t.info.name].append(u.box)
                per_rank[u.owner] += u.nbytes
                load[u.owner] += u.nbytes
                assert u.nbytes > 0
            assert max(per_rank) <= max(batch_bytes, 8), (case, per_rank)
        for t in tensors:
            seen = []
            for box in fetched[t.info.name]:
                seen += sorted(_elements(box, t.eshape))
            assert len(seen) == len(set(seen)), f"case {case}: bytes of {t.info.name} fetched twice"
            wanted = set()
            boxes = [needs[r][t.info.name] for r in range(world) if t.info.name in needs[r]]
            for box in boxes:
                wanted |= _elements(box, t.eshape)
            assert wanted <= set(seen), f"case {case}: bytes of {t.info.name} not fetched"
            if all(_flat_interval(b, t.eshape) is not None for b in boxes if _elements(b, t.eshape)):
                assert set(seen) == wanted, f"case {case}: bytes of {t.info.name} fetched that nobody needs"
        total = sum(load)
        assert max(load) <= total / world * (1 + _BALANCE_SLACK) + 8, (case, load)  # + one element


def test_without_a_process_group_it_says_so(files):
    with pytest.raises(RuntimeError, match="init_process_group"):
        rd.load_file(files["model"])


def task_bad_argument(ctx, path, what):
    mine = dist.get_rank() == 3
    if what == "shard":
        return rd.load_file(path, shard={"cube": 7} if mine else None) and "loaded"
    if what == "memory_limit":
        return rd.load_file(path, memory_limit=0 if mine else 1 << 20) and "loaded"
    return rd.read_into(path, [] if mine else {}) and "loaded"


@pytest.mark.parametrize("what,cls,text", [("shard", "SafetensorError", "cube"),
                                           ("memory_limit", "ValueError", "memory_limit"),
                                           ("read_into", "TypeError", "dict")])
def test_a_bad_argument_on_one_rank_is_everyones_error(world4, files, what, cls, text):
    res = world4.run(task_bad_argument, files["model"], what)
    assert all(r[0] == "err" and r[1] == cls and r[3].startswith("rank 3 of 4: ") and text in r[3]
               for r in res), res

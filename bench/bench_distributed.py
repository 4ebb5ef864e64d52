"""Cooperative loading vs every rank loading alone, over an object store
modelled by a per-connection rate cap, with N ranks in one gloo group on this
machine.

    PYTHONPATH=build/engine/python .venv/bin/python bench/bench_distributed.py \\
        --ranks 4 --size-mib 128 --rate 1m --connections 8 --http-chunk-mib 1 --memory-limit-mib 64

The store is the project's fault server (tests/support/fault_server.cpp, built as
build/tests/support/fault_server), whose ``rate=`` caps every response's send rate
exactly, and whose /stats?id= counts the body bytes and requests of each URL
id: each rank and arm gets its own id, so the bytes are the server's own count.
``--server nginx`` uses nginx ``limit_rate`` instead (counted from its access
log); nginx lets each response burst one second's worth of the rate first, so
Range requests must be much larger than the rate for it to act as a cap.

Arms, each timed from a barrier before to a barrier after the load (the
slowest rank's time):
  alone        every rank calls ringsafe.torch.load_file(url) at the same time
  cooperative  every rank calls ringsafe.distributed.load_file(url)
Every rank checks that both arms gave it the same bytes. Prints a Markdown table.
"""

import argparse
import datetime
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_checkpoint(path, size_mib):
    """A decoder-shaped BF16 checkpoint of about size_mib MiB."""
    import torch
    from ringsafe.torch import save_file
    g = torch.Generator().manual_seed(0)
    hidden, inter = 1024, 2816
    vocab = max(1024, size_mib * 2**20 // 16 // (hidden * 2))  # embeddings and head: 1/8 of the size
    tensors = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g).to(torch.bfloat16)}
    per_layer = (4 * hidden * hidden + 3 * hidden * inter) * 2
    layers = max(1, (size_mib * 2**20 - 2 * vocab * hidden * 2) // per_layer)
    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[p + f"self_attn.{n}.weight"] = torch.randn(hidden, hidden, generator=g).to(torch.bfloat16)
        tensors[p + "mlp.gate_proj.weight"] = torch.randn(inter, hidden, generator=g).to(torch.bfloat16)
        tensors[p + "mlp.up_proj.weight"] = torch.randn(inter, hidden, generator=g).to(torch.bfloat16)
        tensors[p + "mlp.down_proj.weight"] = torch.randn(hidden, inter, generator=g).to(torch.bfloat16)
        tensors[p + "input_layernorm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    tensors["model.norm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    tensors["lm_head.weight"] = torch.randn(vocab, hidden, generator=g).to(torch.bfloat16)
    save_file(tensors, path)


class Nginx:
    def __init__(self, root, prefix, rate):
        self.prefix = pathlib.Path(prefix)
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        p = self.prefix
        user = "user root root;\n" if os.geteuid() == 0 else ""
        (p / "nginx.conf").write_text(f"""{user}worker_processes 2;
pid {p}/nginx.pid;
error_log {p}/error.log;
events {{ worker_connections 1024; }}
http {{
  client_body_temp_path {p}/tmp/body; proxy_temp_path {p}/tmp/proxy; fastcgi_temp_path {p}/tmp/fcgi;
  uwsgi_temp_path {p}/tmp/uwsgi; scgi_temp_path {p}/tmp/scgi;
  log_format rs '$connection "$http_range" $body_bytes_sent';
  access_log {p}/access.log rs;
  default_type application/octet-stream;
  keepalive_requests 100000;
  sendfile on;
  server {{
    listen 127.0.0.1:{self.port};
    root {root};
    limit_rate {rate};
  }}
}}
""")
        self.proc = subprocess.Popen(["nginx", "-p", str(p), "-c", str(p / "nginx.conf"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("nginx did not start")
                time.sleep(0.05)

    def lines(self):
        path = self.prefix / "access.log"
        last = None
        while True:
            cur = path.read_text().splitlines() if path.exists() else []
            if cur == last:
                return cur
            last = cur
            time.sleep(0.1)

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def rank_main(rank, world, port, conn, options, memory_limit):
    import torch
    import torch.distributed as dist
    import ringsafe.distributed as rd
    import ringsafe.torch as rt
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    reference = None
    while True:
        msg = conn.recv()
        if msg is None:
            break
        arm, url = msg[0], msg[1][rank]
        stats = {}
        dist.barrier()
        t0 = time.perf_counter()
        if arm == "alone":
            got = rt.load_file(url, **options)
        else:
            got = rd.load_file(url, memory_limit=memory_limit, stats=stats, **options)
        t1 = time.perf_counter()
        dist.barrier()
        t2 = time.perf_counter()
        if reference is None:
            reference = got
            same = True
        else:
            same = sorted(got) == sorted(reference) and all(
                torch.equal(got[n].view(torch.uint8), reference[n].view(torch.uint8)) for n in got)
        fetched = stats.get("fetched_bytes", sum(t.numel() * t.element_size() for t in got.values()))
        conn.send({"rank": rank, "own_s": t1 - t0, "wall_s": t2 - t0, "fetched": fetched, "same": same,
                   "staging_peak": stats.get("staging_peak", 0), "batches": stats.get("batches", 0),
                   "received": stats.get("received_bytes", 0),
                   "phases": {k: round(stats[k], 3) for k in ("fetch_wait_s", "agree_s", "exchange_s") if k in stats}})
        del got
    dist.destroy_process_group()


def parse_rate(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if not m:
        raise SystemExit(f"--rate: expected a number with an optional k/m/g suffix, got {text!r}")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


class FaultServer:
    def __init__(self, exe, ckpt, rate):
        self.proc = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.base = f"http://127.0.0.1:{int(self.proc.stdout.readline().split()[1])}"
        self.ckpt, self.rate = ckpt, rate

    def url(self, id_):
        return f"{self.base}/model.safetensors?file={self.ckpt}&rate={self.rate}&id={id_}"

    def stats(self, id_):
        import urllib.request
        with urllib.request.urlopen(f"{self.base}/stats?id={id_}") as r:
            f = r.read().decode().split()
        return int(f[3]), int(f[5])  # requests, bytes

    def close(self):
        self.proc.kill()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--size-mib", type=int, default=128)
    ap.add_argument("--rate", default="1m", help="cap per connection, bytes/s with k/m/g suffix (default 1m)")
    ap.add_argument("--server", choices=("fault", "nginx"), default="fault")
    ap.add_argument("--fault-server", help="path of the fault server (default: <build>/tests/support/fault_server)")
    ap.add_argument("--connections", type=int, default=8, help="connections per rank (Reader option)")
    ap.add_argument("--http-chunk-mib", type=float, default=1.0, help="Range request size (Reader option)")
    ap.add_argument("--memory-limit-mib", type=int, default=64, help="cooperative staging limit per rank")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = ap.parse_args()
    rate = parse_rate(args.rate)

    work = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="ringsafe-bench-dist-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    ckpt = work / "www" / "model.safetensors"
    ckpt.parent.mkdir(exist_ok=True)
    os.chmod(ckpt.parent, 0o755)
    if not ckpt.exists():
        make_checkpoint(ckpt, args.size_mib)
    os.chmod(ckpt, 0o644)
    size = ckpt.stat().st_size
    if args.server == "nginx":
        server = Nginx(ckpt.parent, work / "nginx", rate)
    else:
        import ringsafe
        exe = args.fault_server or str(pathlib.Path(ringsafe.__file__).resolve().parents[3] / "tests" / "support" / "fault_server")
        server = FaultServer(exe, ckpt, rate)
    options = {"connections": args.connections, "http_chunk": int(args.http_chunk_mib * 2**20)}
    ctx = mp.get_context("spawn")
    port = free_port()
    conns, procs = [], []
    for r in range(args.ranks):
        a, b = ctx.Pipe()
        p = ctx.Process(target=rank_main, args=(r, args.ranks, port, b, options, args.memory_limit_mib << 20))
        p.start()
        conns.append(a)
        procs.append(p)
    rows = []
    try:
        for rep in range(args.repeat):
            for arm in ("alone", "cooperative"):
                ids = [f"{arm}-{rep}-r{r}" for r in range(args.ranks)]
                if args.server == "nginx":
                    urls = [f"http://127.0.0.1:{server.port}/model.safetensors"] * args.ranks
                    before = len(server.lines())
                else:
                    urls = [server.url(i) for i in ids]
                for c in conns:
                    c.send((arm, urls))
                res = [c.recv() for c in conns]
                if args.server == "nginx":
                    lines = server.lines()[before:]
                    source, nreq = sum(int(l.rsplit(" ", 1)[1]) for l in lines), len(lines)
                    for x in res:
                        x["source"] = None
                else:
                    for x, i in zip(res, ids):
                        x["requests"], x["source"] = server.stats(i)
                    source, nreq = sum(x["source"] for x in res), sum(x["requests"] for x in res)
                rows.append((arm, res, source, nreq))
                print(f"# {arm} run {rep + 1}: {max(x['wall_s'] for x in res):.2f} s, {source / 2**20:.1f} MiB "
                      f"from the source in {nreq} requests; per rank: "
                      + ", ".join(f"{x['own_s']:.2f} s {x['phases']}" for x in res), file=sys.stderr)
    finally:
        for c in conns:
            c.send(None)
        for p in procs:
            p.join(60)
        server.close()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    def best(arm):
        return min((r for r in rows if r[0] == arm), key=lambda r: max(x["wall_s"] for x in r[1]))

    alone, coop = best("alone"), best("cooperative")
    t_alone = max(x["wall_s"] for x in alone[1])
    store = ("the fault server (rate= per response)" if args.server == "fault"
             else "nginx (limit_rate per connection)")
    print(f"\n{args.ranks} ranks (gloo, 127.0.0.1), a {size / 2**20:.1f} MiB checkpoint ({size} bytes) served by "
          f"{store} capped at {rate / 2**20:g} MiB/s per connection; {args.connections} connections and "
          f"{args.http_chunk_mib:g} MiB Range requests per rank; cooperative memory_limit "
          f"{args.memory_limit_mib} MiB; best of {args.repeat}.\n")
    print("| arm | time (s) | speedup | fetched from the source | x one copy | requests | "
          "fetched per rank (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, (_, res, source, nreq) in (("each rank alone", alone), ("cooperative", coop)):
        t = max(x["wall_s"] for x in res)
        per_rank = " / ".join(f"{(x['source'] if x['source'] is not None else x['fetched']) / 2**20:.2f}"
                              for x in res)
        print(f"| {label} | {t:.2f} | {t_alone / t:.2f}x | {source / 2**20:.2f} MiB | {source / size:.4f} | "
              f"{nreq} | {per_rank} |")
    peak = max(x["staging_peak"] for x in coop[1])
    same = all(x["same"] for _, res, _, _ in rows for x in res)
    print(f"\nBytes include each rank's header probe (one 256 KiB Range request on open). Cooperative: "
          f"{coop[1][0]['batches']} batches, staging peak {peak / 2**20:.1f} MiB per rank, "
          f"{sum(x['received'] for x in coop[1]) / 2**20:.1f} MiB exchanged over gloo in all. "
          f"Same bytes on every rank in both arms: {'yes' if same else 'NO'}.")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()

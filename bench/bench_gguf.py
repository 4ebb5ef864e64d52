#!/usr/bin/env python3
"""GGUF reads from Python against gguf-py and transformers (issue 39's table, rows 2-4).

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_gguf.py
      [--only load,raw,pretrained] [--size-gib 2] [--types Q8_0,Q4_K] [--reps 3]
      [--params-m 160] [--dir /var/tmp]

Files are made once with gguf-py's GGUFWriter from random blocks with finite
scales (tests/python/gguf_blocks.py): fine for speed, the values are noise.
Every arm of every repetition runs in a fresh Python process, the arms'
order turning with the repetition; "cold" evicts the file's pages
(POSIX_FADV_DONTNEED) before each arm, "hot" reads it once before. The table
gives medians over repetitions and the median of the per-repetition ratios.

  load        ringsafe.gguf.load_file(path) (float32 torch tensors) against
              GGUFReader(path) + gguf.quants.dequantize of every tensor (kept)
  raw         ringsafe.gguf.load_file(path, raw=True, framework="np") against
              GGUFReader + np.copy of every tensor's blocks (every byte touched,
              into memory of its own, as ringsafe's) and mmap + memcpy (a fresh
              buffer per tensor, filled from one mapping of the file)
  pretrained  ringsafe.transformers.from_pretrained(folder, LlamaForCausalLM,
              gguf_file=) against transformers' LlamaForCausalLM.from_pretrained
              (folder, gguf_file=), a llama of --params-m million parameters
              whose matrices are of the type (norms F32)
  header      over the Hub stand-in, its CDN at --store-rate bytes/s a connection
              with --store-delay-ms before each answer: the header of a file with a
              150k-token vocabulary and 300k merges plus --size-gib of tensors,
              ringsafe.gguf.open("hf://...") (what `ringsafe ls` reads) against
              hf_hub_download + GGUFReader; the CDN's requests and bytes are counted
  part        the same file: 16 % of its tensors (every sixth), ringsafe.gguf.load_file
              ("hf://...", select=) dequantized, against hf_hub_download + GGUFReader +
              dequantize of those tensors (each arm with an empty Hub cache)
"""
import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {
    "load": ["ringsafe", "gguf-py"],
    "raw": ["ringsafe", "gguf-py", "mmap+memcpy"],
    "pretrained": ["ringsafe", "transformers"],
    "header": ["ringsafe", "hf_hub_download + gguf-py"],
    "part": ["ringsafe", "hf_hub_download + gguf-py"],
}
REMOTE = ("header", "part")
HF_REPO = "bench/gguf"


# ---------------------------------------------------------------- files

def _blocks(type_name, rows, cols, rng):
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import gguf_blocks
    per, size = gguf_blocks.LAYOUT[type_name]
    return gguf_blocks.random_blocks(type_name, rows * cols // per, rng).reshape(rows, cols // per * size)


def finish(w):
    """Writes a GGUFWriter's header, metadata and tensors, and closes it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_flat(path, type_name, size_bytes):
    """Tensors of 4096 x 4096 elements of `type_name` up to about `size_bytes`."""
    import gguf
    import numpy as np
    rng = np.random.default_rng(5)
    w = gguf.GGUFWriter(path, "llama")
    one = _blocks(type_name, 4096, 4096, rng)
    for i in range(max(1, size_bytes // one.nbytes)):
        w.add_tensor(f"blk.{i}.weight", one, raw_dtype=gguf.GGMLQuantizationType[type_name])
    finish(w)


def make_llama(path, type_name, params_m):
    """A llama of about params_m million parameters: hidden 768, ffn 2048, vocab 32000, layers to fit."""
    import gguf
    import numpy as np
    rng = np.random.default_rng(6)
    hidden, ffn, vocab, heads = 768, 2048, 32000, 12
    per_layer = 4 * hidden * hidden + 3 * hidden * ffn
    layers = max(1, (params_m * 10**6 - 2 * vocab * hidden) // per_layer)
    qtype = gguf.GGMLQuantizationType[type_name]
    sys.path.insert(0, str(REPO / "tests" / "python"))
    from gguf_blocks import add_llama_metadata
    w = gguf.GGUFWriter(path, "llama")
    add_llama_metadata(w, hidden=hidden, ffn=ffn, layers=layers, heads=heads, kv_heads=heads, vocab=vocab)

    def mat(name, rows, cols):
        w.add_tensor(name, _blocks(type_name, rows, cols, rng), raw_dtype=qtype)

    def norm(name):
        w.add_tensor(name, np.ones(hidden, dtype=np.float32))

    mat("token_embd.weight", vocab, hidden)
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            mat(f"blk.{i}.{part}.weight", hidden, hidden)
        norm(f"blk.{i}.ffn_norm.weight")
        mat(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        mat(f"blk.{i}.ffn_up.weight", ffn, hidden)
        mat(f"blk.{i}.ffn_down.weight", hidden, ffn)
    norm("output_norm.weight")
    mat("output.weight", vocab, hidden)
    finish(w)
    return 2 * vocab * hidden + layers * (per_layer + 2 * hidden) + hidden


def make_remote(path, type_name, size_bytes):
    """A llama.cpp-sized tokenizer (150k tokens, 300k merges) and tensors of 4096 x 4096."""
    import gguf
    import numpy as np
    rng = np.random.default_rng(8)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i:06d}" for i in range(150_000)])
    w.add_token_merges([f"t{i % 977} k{i:06d}" for i in range(300_000)])
    one = _blocks(type_name, 4096, 4096, rng)
    for i in range(max(6, size_bytes // one.nbytes)):
        w.add_tensor(f"blk.{i}.weight", one, raw_dtype=gguf.GGMLQuantizationType[type_name])
    finish(w)


def part_names(n):
    return [f"blk.{i}.weight" for i in range(0, n, 6)]


# ---------------------------------------------------------------- arms (each in a fresh process)

def remote_arm(op, arm, name):
    """The Hub arms (HF_ENDPOINT and an empty HF_HUB_CACHE set by the parent)."""
    import numpy as np
    url = f"hf://{HF_REPO}/{name}"
    t0 = time.perf_counter()
    if arm == "ringsafe":
        import ringsafe.gguf
        t0 = time.perf_counter()
        if op == "header":
            with ringsafe.gguf.open(url) as f:
                out = len(f.metadata["tokenizer.ggml.tokens"])
        else:
            with ringsafe.gguf.open(url) as f:
                names = part_names(len(f.tensors))
                out = f.load(select=names)
    else:
        from gguf import GGUFReader, dequantize
        from huggingface_hub import hf_hub_download
        t0 = time.perf_counter()
        local = hf_hub_download(HF_REPO, name)
        download = time.perf_counter() - t0
        r = GGUFReader(local)
        if op == "header":
            out = len(r.fields["tokenizer.ggml.tokens"].data)
        else:
            chosen = set(part_names(len(r.tensors)))
            out = {t.name: np.copy(dequantize(t.data, t.tensor_type)) for t in r.tensors if t.name in chosen}
    seconds = time.perf_counter() - t0
    del out
    return seconds, (download if arm != "ringsafe" else 0.0)


def run_arm(op, arm, path):
    import numpy as np
    import torch  # noqa: F401  (imported before the clock in every arm: the torch arms' users have it)
    if op in REMOTE:
        seconds, download = remote_arm(op, arm, os.path.basename(path))
        print(json.dumps({"seconds": seconds, "download": download}))
        return
    t0 = time.perf_counter()
    if op == "load" and arm == "ringsafe":
        import ringsafe.gguf
        t0 = time.perf_counter()
        out = ringsafe.gguf.load_file(path)
    elif op == "load":
        from gguf import GGUFReader, dequantize
        t0 = time.perf_counter()
        r = GGUFReader(path)
        out = {t.name: dequantize(t.data, t.tensor_type) for t in r.tensors}
    elif op == "raw" and arm == "ringsafe":
        import ringsafe.gguf
        t0 = time.perf_counter()
        out = ringsafe.gguf.load_file(path, raw=True, framework="np")
    elif op == "raw" and arm == "gguf-py":
        from gguf import GGUFReader
        t0 = time.perf_counter()
        r = GGUFReader(path)
        out = {t.name: np.copy(t.data) for t in r.tensors}
    elif op == "raw":
        import ringsafe.gguf
        with ringsafe.gguf.open(path) as f:  # the records only (before the clock)
            ranges = [(t.name, f.data_offset + t.offset, t.nbytes) for t in f.tensors]
        t0 = time.perf_counter()
        with open(path, "rb") as fh:
            m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
            view = np.frombuffer(m, dtype=np.uint8)
            out = {}
            for name, start, n in ranges:
                out[name] = np.empty(n, dtype=np.uint8)
                np.copyto(out[name], view[start:start + n])
            del view
    else:
        import torch  # noqa: F401
        import transformers
        folder, name = os.path.dirname(path), os.path.basename(path)
        cls = transformers.LlamaForCausalLM  # its module imported before the clock
        if arm == "ringsafe":
            import ringsafe.transformers
            t0 = time.perf_counter()
            out = ringsafe.transformers.from_pretrained(folder, cls, gguf_file=name)
        else:
            t0 = time.perf_counter()
            out = cls.from_pretrained(folder, gguf_file=name)
    seconds = time.perf_counter() - t0
    del out
    print(json.dumps({"seconds": seconds}))


# ---------------------------------------------------------------- driver

def child(op, arm, path, cache, hub=None):
    """Seconds of one arm in a fresh process; for the Hub arms also (requests, bytes) at its CDN."""
    from page_cache import drop_cache, warm
    (drop_cache if cache == "cold" else warm)(path)
    env = None
    if hub is not None:
        import tempfile
        env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=tempfile.mkdtemp(dir=os.path.dirname(path)),
                   HF_HUB_DISABLE_TELEMETRY="1")
        env.pop("HF_TOKEN", None)
        mark = hub.cdn.mark()
    p = subprocess.run([sys.executable, __file__, "--child", op, arm, path], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{op} {arm} failed:\n{p.stderr[-3000:]}")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    seconds = result["seconds"]
    if hub is None:
        return seconds
    import shutil
    shutil.rmtree(env["HF_HUB_CACHE"], ignore_errors=True)
    entries = hub.cdn.log(since=mark)
    return seconds, len(entries), sum(e.body_bytes for e in entries), result["download"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="load,raw,pretrained")
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--types", default="Q8_0,Q4_K")
    ap.add_argument("--caches", default="hot,cold", help="for load (raw is hot only)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--params-m", type=int, default=160)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--store-rate", type=int, default=50_000_000, help="header/part: CDN bytes/s a connection")
    ap.add_argument("--store-delay-ms", type=int, default=20, help="header/part: before each answer")
    ap.add_argument("--child", nargs=3, metavar=("OP", "ARM", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_arm(*args.child)
        return

    rows, remote_rows = [], []
    for op in args.only.split(","):
        if op in REMOTE:
            remote_rows += remote(op, args)
            continue
        for type_name in args.types.split(","):
            path = os.path.join(args.dir, f"ringsafe-bench-{op}-{type_name}.gguf")
            if op == "pretrained":
                params = make_llama(path, type_name, args.params_m)
                what = f"llama {params / 1e6:.0f}M params {type_name}"
            else:
                make_flat(path, type_name, int(args.size_gib * (1 << 30)))
                what = f"{type_name}"
            size = os.path.getsize(path)
            caches = args.caches.split(",") if op == "load" else ["hot"]
            try:
                for cache in caches:
                    arms = ARMS[op]
                    times = {a: [] for a in arms}
                    for rep in range(args.reps):
                        k = rep % len(arms)
                        for arm in arms[k:] + arms[:k]:
                            times[arm].append(child(op, arm, path, cache))
                    med = {a: statistics.median(ts) for a, ts in times.items()}
                    ratios = {a: statistics.median(b / r for b, r in zip(times[a], times["ringsafe"]))
                              for a in arms[1:]}
                    rows.append((op, what, cache, size, med, ratios))
                    print(f"{op} {what} {cache} done", file=sys.stderr)
            finally:
                os.unlink(path)

    print(f"GGUF from Python, {args.reps} repetitions (fresh process per arm), medians")
    print("| op | file | cache | size (MB) | ringsafe (s) | ringsafe GB/s of file | baselines (s) | ringsafe speedup |")
    print("|---|---|---|---|---|---|---|---|")
    for op, what, cache, size, med, ratios in rows:
        base = ", ".join(f"{a} {med[a]:.2f}" for a in ratios)
        speed = ", ".join(f"**{r:.1f}x** {a}" for a, r in ratios.items())
        print(f"| {op} | {what} | {cache} | {size / 1e6:.0f} | {med['ringsafe']:.2f} | "
              f"{size / med['ringsafe'] / 1e9:.2f} | {base} | {speed} |")
    if remote_rows:
        print(f"\nOver the Hub stand-in (CDN {args.store_rate / 1e6:.0f} MB/s a connection, "
              f"{args.store_delay_ms} ms before each answer), medians")
        print("| op | file (MB) | header (MB) | arm | seconds (of which download) | CDN requests | CDN MB | "
              "ringsafe speedup |")
        print("|---|---|---|---|---|---|---|---|")
        for op, size, header, arm, sec, req, nbytes, download, ratio in remote_rows:
            speed = "" if ratio is None else f"**{ratio:.1f}x**"
            took = f"{sec:.2f}" if arm == "ringsafe" else f"{sec:.2f} ({download:.2f})"
            print(f"| {op} | {size / 1e6:.0f} | {header / 1e6:.1f} | {arm} | {took} | {req:.0f} | "
                  f"{nbytes / 1e6:.1f} | {speed} |")


def remote(op, args):
    """Rows of a Hub operation: per arm, the median seconds, requests and bytes at the CDN."""
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import tempfile
    import servers
    work = Path(tempfile.mkdtemp(dir=args.dir, prefix="ringsafe-bench-hub-"))
    type_name = args.types.split(",")[0]
    path = work / f"model-{type_name}.gguf"
    make_remote(path, type_name, int(args.size_gib * (1 << 30)))
    size = path.stat().st_size
    import ringsafe.gguf
    with ringsafe.gguf.open(path) as f:
        header = f.data_offset
    hub = servers.HubStandin(work / "hub-root", work / "hub-run", cdn_extra=f"    limit_rate {args.store_rate};\n")
    try:
        hub.add_repo(HF_REPO, {path.name: path})
        hub.control(HF_REPO, "delay_ms", args.store_delay_ms)
        arms = ARMS[op]
        got = {a: [] for a in arms}
        for rep in range(args.reps):
            k = rep % len(arms)
            for arm in arms[k:] + arms[:k]:
                got[arm].append(child(op, arm, str(path), "hot", hub))
        print(f"{op} done", file=sys.stderr)
    finally:
        hub.close()
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for arm in arms:
        sec = statistics.median(g[0] for g in got[arm])
        req = statistics.median(g[1] for g in got[arm])
        nbytes = statistics.median(g[2] for g in got[arm])
        download = statistics.median(g[3] for g in got[arm])
        ratio = None if arm == "ringsafe" else statistics.median(
            b[0] / r[0] for b, r in zip(got[arm], got["ringsafe"]))
        rows.append((op, size, header, arm, sec, req, nbytes, download, ratio))
    return rows


if __name__ == "__main__":
    main()

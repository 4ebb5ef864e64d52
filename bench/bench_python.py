#!/usr/bin/env python3
"""ringsafe's Python API against the reference safetensors, on the operations a
loader performs, on a llama-like checkpoint (bf16 weights, f32 norms, names
model.layers.N.*) written once with safetensors.torch.save_file.

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_python.py
      [--size-gib 2] [--reps 5] [--only load_model,loop,load_file,save_file,overhead]
      [--hot | --cold] [--dir DIR] [--quick]

Every repetition of every arm runs in a fresh Python process (clean allocator,
page-cache state and peak RSS); arms are interleaved (A B A B ...); the table
gives the median. Operations:

  load_model  X.torch.load_model(model, path) into a model whose parameters match
              the checkpoint (names, shapes, dtypes), made with torch.empty and
              touched (zeroed) before the clock starts, as an existing model's are
  loop        with X.safe_open(path, "pt"): get_tensor(k) for every key, each
              tensor read once (below) as it arrives
  load_file   X.torch.load_file(path), then one read of every byte
  save_file   X.torch.save_file(d, fresh path) of a dict already in memory (ringsafe
              with sync=False: the reference does not fsync); the file is removed after
  overhead    ringsafe.torch.load_file(path) alone (no read afterwards: its data is
              in memory when it returns) against the C++ CLI `ringsafe load --json`
              (default destination: a huge-page arena, like load_file's); the CLI's
              own timer covers open + header + reads, not its arena's allocation
              (done before its clock), so the load_file row also pays for fresh
              memory (the kernel zeroes every page on first touch); a third arm,
              ringsafe.torch.read_into views of a ringsafe.Arena allocated and
              prefaulted before the clock (the CLI's conditions), shows the Python
              layer's own cost; the CLI process's wall time is printed below the table

"One read of every byte" = the sum of every tensor's bytes viewed as int64, the
same for both libraries: safetensors 0.8 hands out lazy mmap-backed tensors, so
its load alone moves no data; the checksums of both arms are compared.
cache hot: the file is read once (read(2)) before each repetition; cold: fsync +
posix_fadvise(POSIX_FADV_DONTNEED) before each repetition ("guest-cold": a
virtual disk's host may still cache it). GB = 1e9 bytes of the file.
peak RSS = the process's high-water RSS (VmHWM, what ru_maxrss reports for one
process) minus its RSS after imports; +op = that peak minus the RSS when the
clock started (the operation's own memory: the model or the dict to save is
resident before). Pages of a mmap-ed file count in RSS once touched.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "build" / "tools" / "ringsafe"
OPS = ("load_model", "loop", "load_file", "save_file", "overhead")
REF, MINE, CLI_ARM = "safetensors.torch", "ringsafe.torch", "ringsafe load (C++)"
INTO = "rt.read_into arena"  # overhead: into a prefaulted huge-page arena

# TinyLlama-1.1B's shapes (22 layers: 2.2 GB, 201 tensors); the layer count
# follows --size-gib.
HIDDEN, INTER, KV, VOCAB = 2048, 5632, 256, 32000


def layer_shapes(i):
    p = f"model.layers.{i}."
    yield p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN), "bf16"
    yield p + "self_attn.k_proj.weight", (KV, HIDDEN), "bf16"
    yield p + "self_attn.v_proj.weight", (KV, HIDDEN), "bf16"
    yield p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN), "bf16"
    yield p + "mlp.gate_proj.weight", (INTER, HIDDEN), "bf16"
    yield p + "mlp.up_proj.weight", (INTER, HIDDEN), "bf16"
    yield p + "mlp.down_proj.weight", (HIDDEN, INTER), "bf16"
    yield p + "input_layernorm.weight", (HIDDEN,), "f32"
    yield p + "post_attention_layernorm.weight", (HIDDEN,), "f32"


def make_checkpoint(path, size_gib):
    """Writes the checkpoint with the reference's save_file (random bytes)."""
    import torch
    import safetensors.torch as st
    per_layer = sum(2 * s[0] * (s[1] if len(s) > 1 else 2) for _, s, _ in layer_shapes(0))
    embeds = 2 * 2 * VOCAB * HIDDEN
    layers = max(1, -(-(int(size_gib * 2**30) - embeds) // per_layer))
    g = torch.Generator().manual_seed(0)
    t = {"model.embed_tokens.weight": None, "lm_head.weight": None, "model.norm.weight": torch.ones(HIDDEN)}
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        t[k] = torch.randint(-2**15, 2**15, (VOCAB, HIDDEN), dtype=torch.int16, generator=g).view(torch.bfloat16)
    for i in range(layers):
        for name, shape, kind in layer_shapes(i):
            if kind == "bf16":
                t[name] = torch.randint(-2**15, 2**15, shape, dtype=torch.int16, generator=g).view(torch.bfloat16)
            else:
                t[name] = torch.rand(shape, generator=g) + 0.5
    st.save_file(t, path, metadata={"format": "pt"})


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


# ---------------------------------------------------------------- child side

def touch(t, torch):
    """One read of every byte: a vectorized int64 sum (uint8 where the size or
    the offset is not a multiple of 8), wrapping."""
    if not t.numel():
        return 0
    raw = t.reshape(-1).view(torch.uint8)
    try:
        return int(raw.view(torch.int64).sum())
    except RuntimeError:
        return int(raw.sum())


def checksum(tensors, torch):
    return sum(touch(t, torch) for t in tensors) & (2**64 - 1)


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def build_model(header, torch):
    """An nn.Module tree whose parameters are the checkpoint's tensors (same
    names, shapes, dtypes), made with torch.empty and zeroed (resident)."""
    dtypes = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}
    root = torch.nn.Module()
    for name, info in header.items():
        *path, leaf = name.split(".")
        m = root
        for part in path:
            sub = m._modules.get(part)
            if sub is None:
                sub = torch.nn.Module()
                m.add_module(part, sub)
            m = sub
        p = torch.nn.Parameter(torch.empty(info["shape"], dtype=dtypes[info["dtype"]]), requires_grad=False)
        m.register_parameter(leaf, p)
    with torch.no_grad():
        for p in root.parameters():
            p.zero_()
    return root


def child(op, arm, path, work):
    """One timed repetition in this fresh process; prints one JSON line."""
    import torch
    import safetensors
    import safetensors.torch as st
    import ringsafe
    import ringsafe.torch as rt
    top, mod = (safetensors, st) if arm == REF else (ringsafe, rt)
    # The imports' transient peak must not count: reset the high-water mark.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status_kib("VmRSS")

    prep, target, check = None, None, None
    if op == "load_model":
        prep = build_model(json.loads((Path(work) / "header.json").read_text()), torch)
    elif op == "overhead" and arm == INTO:
        header = json.loads((Path(work) / "header.json").read_text())
        dtypes = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}
        spans, size = [], 0
        for k, info in header.items():
            n = info["data_offsets"][1] - info["data_offsets"][0]
            spans.append((k, size, n, info))
            size += -(-n // 64) * 64
        arena = ringsafe.Arena(size, prefault=True)
        flat = torch.frombuffer(arena, dtype=torch.uint8)
        prep = {k: flat[o:o + n].view(dtypes[i["dtype"]]).view(i["shape"]) for k, o, n, i in spans}
        del flat, arena  # the views keep the arena
    elif op == "save_file":
        prep = {k: v.clone() for k, v in st.load_file(path).items()}
        target = Path(work) / f"saved-{os.getpid()}.safetensors"
    start = status_kib("VmRSS")

    t0 = time.perf_counter()
    if op == "load_model":
        mod.load_model(prep, path)
    elif op == "loop":
        check = 0
        with top.safe_open(path, "pt") as f:
            for k in f.keys():
                check += touch(f.get_tensor(k), torch)
        check &= 2**64 - 1
    elif op == "load_file":
        check = checksum(mod.load_file(path).values(), torch)
    elif op == "overhead" and arm == INTO:
        out = rt.read_into(path, prep)
    elif op == "overhead":
        out = rt.load_file(path)
    elif op == "save_file":
        if arm == REF:
            st.save_file(prep, target)
        else:
            rt.save_file(prep, target, sync=False)
    seconds = time.perf_counter() - t0

    peak = status_kib("VmHWM")
    if op == "load_model":  # untimed: the parameters hold the file's bytes
        check = checksum((p for _, p in sorted(prep.state_dict().items())), torch)
    elif op == "overhead":
        del out
    elif op == "save_file":
        check = target.stat().st_size
        target.unlink()
    print(json.dumps({"seconds": seconds, "peak_mib": (peak - base) / 1024,
                      "op_mib": (peak - start) / 1024, "check": check}))


# --------------------------------------------------------------- parent side

def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path):
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


def resident_fraction(path):
    """Fraction of the file in the page cache (fincore), None if unknown."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) / os.path.getsize(path)
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def child_env():
    env = dict(os.environ)
    if not env.get("PYTHONPATH"):
        env["PYTHONPATH"] = str(REPO / "build" / "engine" / "python")
    return env


def run_child(op, arm, path, work):
    out = subprocess.run([sys.executable, __file__, "--child", op, arm, str(path), str(work)],
                         capture_output=True, text=True, env=child_env())
    if out.returncode:
        raise SystemExit(f"{op} / {arm} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cli(path):
    """`ringsafe load --json`: its own seconds; ru_maxrss of the process (KiB);
    the process's wall time."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen([str(CLI), "load", "--json", str(path)], stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)  # reaps it, with its rusage
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if p.returncode:
        raise SystemExit(f"ringsafe load failed (exit {p.returncode}):\n{text}")
    r = json.loads(text.strip().splitlines()[-1])
    rss = ru.ru_maxrss / 1024
    return {"seconds": r["seconds"], "peak_mib": rss, "op_mib": float("nan"), "check": None, "wall": wall}


def machine_facts():
    def read(p):
        try:
            return Path(p).read_text().strip()
        except OSError:
            return "?"
    cpu = next((line.split(":", 1)[1].strip() for line in read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.machine())
    mem = next((int(line.split()[1]) for line in read("/proc/meminfo").splitlines()
                if line.startswith("MemTotal")), 0)
    versions = subprocess.run([sys.executable, "-c", "import torch, safetensors, ringsafe; "
                               "print(torch.__version__, safetensors.__version__, torch.get_num_threads())"],
                              capture_output=True, text=True, env=child_env()).stdout.split()
    return (f"nproc {os.cpu_count()} ({cpu}), {mem / 2**20:.1f} GiB RAM, kernel {platform.release()}\n"
            f"THP enabled: {read('/sys/kernel/mm/transparent_hugepage/enabled')}; "
            f"defrag: {read('/sys/kernel/mm/transparent_hugepage/defrag')}\n"
            f"python {platform.python_version()}, torch {versions[0] if versions else '?'} "
            f"({versions[2] if len(versions) > 2 else '?'} threads), "
            f"safetensors {versions[1] if len(versions) > 1 else '?'}; load average {os.getloadavg()[0]:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=2.0, help="checkpoint size (default 2)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per arm (default 5)")
    ap.add_argument("--only", default=",".join(OPS), help="comma-separated operations (default: all)")
    ap.add_argument("--hot", action="store_true", help="page cache hot only")
    ap.add_argument("--cold", action="store_true", help="page cache cold only")
    ap.add_argument("--quick", action="store_true", help="smoke test: 0.5 GiB, 3 repetitions")
    ap.add_argument("--dir", help="where the checkpoint lives (kept and reused); default: a temporary "
                                  "directory removed at the end")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    if a.make:
        return make_checkpoint(a.make[0], float(a.make[1]))
    if a.quick:
        a.size_gib, a.reps = 0.5, 3
    ops = [o for o in a.only.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad or a.reps < 1:
        ap.error(f"unknown operation(s) {bad}; choose from {','.join(OPS)}" if bad else "--reps must be >= 1")
    if "overhead" in ops and not CLI.exists():
        ap.error(f"{CLI} is not built (needed by the overhead operation)")
    states = [s for s, on in (("hot", a.hot or not a.cold), ("cold", a.cold or not a.hot)) if on]

    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="ringsafe-bench-python-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        path = work / f"llama-{a.size_gib:g}gib.safetensors"
        if not path.exists():
            print(f"writing {path} with safetensors.torch.save_file ...", flush=True)
            out = subprocess.run([sys.executable, __file__, "--make", str(path) + ".part", str(a.size_gib)],
                                 env=child_env())
            if out.returncode:
                raise SystemExit("writing the checkpoint failed")
            os.replace(str(path) + ".part", path)
        header = read_header(path)
        (work / "header.json").write_text(json.dumps(header))
        size = path.stat().st_size
        print(machine_facts())
        print(f"checkpoint {path}: {size / 2**30:.2f} GiB, {len(header)} tensors; median of {a.reps}, "
              f"every repetition a fresh process, arms interleaved\n", flush=True)
        run_all(ops, states, a.reps, path, work, size)
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)


def run_all(ops, states, reps, path, work, size):
    print(f"{'operation':10} {'cache':5} {'arm':20} {'median s':>8} {'min-max s':>13} {'GB/s':>6} "
          f"{'peak RSS MiB':>12} {'+op MiB':>7}  speed-up", flush=True)
    notes = []
    for op in ops:
        arms = [CLI_ARM, MINE, INTO] if op == "overhead" else [REF, MINE]
        for state in (["-"] if op == "save_file" else states):
            runs = {arm: [] for arm in arms}
            for _ in range(reps):
                for arm in arms:
                    if state == "cold":
                        drop_cache(path)
                    else:
                        warm(path)
                    runs[arm].append(run_cli(path) if arm == CLI_ARM else run_child(op, arm, path, work))
            if state == "cold":
                drop_cache(path)
                res = resident_fraction(path)
                if res is not None and res > 0.01:
                    notes.append(f"{op} cold: {res:.0%} of the file still cached after the drop")
            checks = {r["check"] for arm in arms for r in runs[arm] if r["check"] is not None}
            if len(checks) > 1:
                raise SystemExit(f"{op} {state}: the arms disagree (checksums/sizes {sorted(checks)})")
            med = {arm: statistics.median(r["seconds"] for r in runs[arm]) for arm in arms}
            for arm in arms:
                secs = [r["seconds"] for r in runs[arm]]
                rss = statistics.median(r["peak_mib"] for r in runs[arm])
                extra = statistics.median(r["op_mib"] for r in runs[arm])
                speed = f"{med[arms[0]] / med[arm]:.2f}x" if arm != arms[0] else ""
                rng = f"{min(secs):.3f}-{max(secs):.3f}"
                extra_s = f"{extra:7.0f}" if extra == extra else f"{'-':>7}"
                print(f"{op:10} {state:5} {arm:20} {med[arm]:8.3f} {rng:>13} {size / med[arm] / 1e9:6.2f} "
                      f"{rss:12.0f} {extra_s}  {speed}", flush=True)
            if op == "overhead":
                walls = statistics.median(r["wall"] for r in runs[CLI_ARM])
                notes.append(f"overhead {state}: `ringsafe load` process wall time {walls:.3f} s "
                             f"(startup, arena allocation + prefault, exit included)")
    print("\nspeed-up = reference median / ringsafe median (overhead: CLI / Python; below 1 = Python slower)")
    for n in notes:
        print(n)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share these cores)")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Loads into GPU memory: ringsafe's device="cuda" paths against the reference
safetensors' and the peers', on a bf16 checkpoint written on the spot (TinyLlama's
shapes, 2 GiB by default), page cache hot and cold, with the pinned host-to-device
copy rate alone as the ceiling. Needs torch with a CUDA device; without one it
prints "skipped: ..." and exits 0 (tests/device/gpu_check.sh runs it on a GPU).

  PYTHONPATH=build/engine/python python3 bench/bench_gpu.py
      [--size-gib 2] [--reps 3] [--hot | --cold] [--dir DIR] [--budget-s S] [--quick]

Arms (each result is compared byte for byte with the reference's bytes on the GPU
after every repetition, untimed; a mismatch stops the run):

  pinned H2D copy       one copy of a pinned host buffer of the file's size into a
                        device buffer (both made once): the ceiling of any load
  ref load + .to        safetensors.torch.load_file(path) then .to("cuda") per tensor
  ref device=cuda       safetensors.torch.load_file(path, device="cuda")
  ringsafe device=cuda  ringsafe.torch.load_file(path, device="cuda")
  ringsafe iter_tensors ringsafe.torch.iter_tensors(path, device="cuda"), kept
  ringsafe load_model   ringsafe.torch.load_model(model, path, device="cuda") into a
                        model whose parameters are CUDA tensors (zeroed, untimed)
  ref load_model        safetensors.torch.load_model(model, path, device="cuda")
  fastsafetensors       SafeTensorsFileLoader(device="cuda:0", nogds=True) (its default
                        I/O, and FASTSAFETENSORS_ODIRECT=0), when importable
  runai                 SafetensorsStreamer().stream_files([path], device="cuda:0"),
                        when importable

One process (CUDA started, the reference's bytes on the GPU for the checks): each arm
runs once first, hot, untimed in the medians (the "first call" column: what a load pays
in a process that has not made it before); then the arms run interleaved (A B C ...
A B C ...), hot and cold in every round. A repetition ends with
torch.cuda.synchronize(), and torch's caching allocator is emptied before each. hot:
the file is read before each repetition unless mincore(2) finds all of it cached; cold:
fsync + POSIX_FADV_DONTNEED before each, the residency checked with mincore(2)
("guest-cold": a VM's host may still cache the disk), and dd iflag=direct gives the
disk's own rate. Medians; ratios against the baselines of the same run; GB = 1e9 bytes.
--budget-s: after S seconds no further repetition starts (the first round always runs
whole); the n column says how many repetitions each median covers.
"""

import argparse
import ctypes
import gc
import json
import mmap
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import page_cache
from page_cache import drop_cache
from safetensors_header import read_header

REPO = Path(__file__).resolve().parents[1]
CEILING = "pinned H2D copy (ceiling)"
REF_TO, REF_DEV, REF_MODEL = "ref load_file + .to(cuda)", "ref load_file(device=cuda)", "ref load_model(cuda)"
MINE, MINE_ITER, MINE_MODEL = "ringsafe load_file(device=cuda)", "ringsafe iter_tensors(device=cuda)", \
    "ringsafe load_model(cuda)"
FST, FST_BUF, RUNAI = "fastsafetensors nogds", "fastsafetensors nogds, ODIRECT=0", "runai stream(device=cuda)"
HIDDEN, INTER, KV, VOCAB = 2048, 5632, 256, 32000  # TinyLlama-1.1B


def layer_shapes(i):
    p = f"model.layers.{i}."
    return [(p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN)), (p + "self_attn.k_proj.weight", (KV, HIDDEN)),
            (p + "self_attn.v_proj.weight", (KV, HIDDEN)), (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
            (p + "mlp.gate_proj.weight", (INTER, HIDDEN)), (p + "mlp.up_proj.weight", (INTER, HIDDEN)),
            (p + "mlp.down_proj.weight", (HIDDEN, INTER)), (p + "input_layernorm.weight", (HIDDEN,)),
            (p + "post_attention_layernorm.weight", (HIDDEN,))]


def make_checkpoint(path, size_gib, torch, st):
    """Random bf16 bytes (made on the GPU, fast), written by the reference."""
    per_layer = sum(2 * (s[0] * s[1] if len(s) > 1 else s[0]) for _, s in layer_shapes(0))
    layers = max(1, -(-(int(size_gib * 2**30) - 2 * 2 * VOCAB * HIDDEN) // per_layer))
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(shape):
        return torch.randint(-2**15, 2**15, shape, dtype=torch.int16, device="cuda",
                             generator=g).view(torch.bfloat16).cpu()

    t = {"model.embed_tokens.weight": rnd((VOCAB, HIDDEN)), "lm_head.weight": rnd((VOCAB, HIDDEN)),
         "model.norm.weight": rnd((HIDDEN,))}
    for i in range(layers):
        t.update({name: rnd(shape) for name, shape in layer_shapes(i)})
    st.save_file(t, str(path) + ".part", metadata={"format": "pt"})
    with open(str(path) + ".part", "rb") as f:
        os.fsync(f.fileno())
    os.replace(str(path) + ".part", path)


# ------------------------------------------------------------ page cache state

def warm(path):
    """Reads the file once, unless every page of it is cached already."""
    if resident_fraction(path) != 1.0:
        page_cache.warm(path)


def resident_fraction(path):
    """Fraction of the file's pages in the page cache (mincore), None if unknown."""
    size = os.path.getsize(path)
    if not size:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec):
                return None
            return (pages - bytes(vec).count(0)) / pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def fs_type(path):
    """The file system type of the mount holding ``path`` (/proc/mounts)."""
    best, kind = "", "?"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mnt, typ = line.split()[:3]
            if str(path).startswith(mnt.rstrip("/") + "/") or str(path) == mnt:
                if len(mnt) >= len(best):
                    best, kind = mnt, typ
    except OSError:
        pass
    return kind


def drop_caches_note():
    p = "/proc/sys/vm/drop_caches"
    if not os.path.exists(p):
        return f"{p} is absent"
    return f"{p} is {'writable (root): available, not used' if os.access(p, os.W_OK) else 'not writable'}"


def dd_direct(path):
    """The disk's own sequential O_DIRECT rate (dd bs=16M), GB/s; None if dd refuses."""
    drop_cache(path)
    t0 = time.perf_counter()
    out = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"], capture_output=True)
    return None if out.returncode else os.path.getsize(path) / (time.perf_counter() - t0) / 1e9


# ------------------------------------------------------------------- the arms

class Arms:
    """Each arm: a function returning (result, release); result is {name: CUDA
    tensor} or the model whose parameters hold the file."""

    def __init__(self, path, header, torch, st, rt, peers):
        self.path, self.header, self.torch, self.st, self.rt = str(path), header, torch, st, rt
        self.names = list(header)
        size = os.path.getsize(path)
        self.src = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        self.src.fill_(1)
        self.dst = torch.empty(size, dtype=torch.uint8, device="cuda")
        self.model = self._model()
        self.table = {CEILING: self.ceiling, REF_TO: self.ref_to, REF_DEV: self.ref_dev, MINE: self.mine,
                      MINE_ITER: self.mine_iter, MINE_MODEL: self.mine_model, REF_MODEL: self.ref_model}
        if "fastsafetensors" in peers:
            self.table[FST] = lambda: self.fst(buffered=False)
            self.table[FST_BUF] = lambda: self.fst(buffered=True)
        if "runai" in peers:
            self.table[RUNAI] = self.runai

    def _model(self):
        torch = self.torch
        root = torch.nn.Module()
        for name, info in self.header.items():
            *path, leaf = name.split(".")
            m = root
            for part in path:
                if part not in m._modules:
                    m.add_module(part, torch.nn.Module())
                m = m._modules[part]
            m.register_parameter(leaf, torch.nn.Parameter(
                torch.zeros(info["shape"], dtype=torch.bfloat16, device="cuda"), requires_grad=False))
        return root

    def ceiling(self):
        self.dst.copy_(self.src, non_blocking=True)
        return None, None

    def ref_to(self):
        return {k: v.to("cuda") for k, v in self.st.load_file(self.path).items()}, None

    def ref_dev(self):
        return self.st.load_file(self.path, device="cuda"), None

    def mine(self):
        return self.rt.load_file(self.path, device="cuda"), None

    def mine_iter(self):
        return dict(self.rt.iter_tensors(self.path, device="cuda")), None

    def _zero_model(self):
        with self.torch.no_grad():
            for p in self.model.parameters():
                p.zero_()
        self.torch.cuda.synchronize()

    def mine_model(self):
        self.rt.load_model(self.model, self.path, device="cuda")
        return self.model, None

    def ref_model(self):
        self.st.load_model(self.model, self.path, device="cuda")
        return self.model, None

    def fst(self, buffered):
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup
        if buffered:
            os.environ["FASTSAFETENSORS_ODIRECT"] = "0"
        else:
            os.environ.pop("FASTSAFETENSORS_ODIRECT", None)
        loader = SafeTensorsFileLoader(SingleGroup(), device="cuda:0", nogds=True)
        loader.add_filenames({0: [self.path]})
        fb = loader.copy_files_to_device()
        out = {n: fb.get_tensor(n) for n in self.names}

        def release():
            fb.close()
            loader.close()
        return out, release

    def runai(self):
        from runai_model_streamer import SafetensorsStreamer
        with SafetensorsStreamer() as s:
            s.stream_files([self.path], device="cuda:0")
            return {n: t for n, t in s.get_tensors()}, None

    def before(self, arm):
        """Untimed set-up of one repetition."""
        if arm in (MINE_MODEL, REF_MODEL):
            self._zero_model()
        gc.collect()
        self.torch.cuda.empty_cache()

    def run(self, arm):
        """Runs one repetition: (seconds, result, release)."""
        self.torch.cuda.synchronize()
        t0 = time.perf_counter()
        result, release = self.table[arm]()
        self.torch.cuda.synchronize()
        return time.perf_counter() - t0, result, release


def flat_bytes(t, torch):
    """The tensor's bytes as a flat uint8 view (bf16 NaNs compare equal as bytes)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def check(arm, result, golden, torch):
    """Raises unless result holds golden's bytes, dtypes, shapes, on the GPU."""
    if result is None:
        return
    tensors = dict(result.state_dict()) if hasattr(result, "state_dict") else result
    if sorted(tensors) != sorted(golden):
        raise SystemExit(f"{arm}: tensors {sorted(set(tensors) ^ set(golden))[:5]} differ from the file's")
    for k, want in golden.items():
        got = tensors[k]
        if got.device.type != "cuda" or got.dtype != want.dtype or got.shape != want.shape:
            raise SystemExit(f"{arm}: {k} is {got.dtype} {tuple(got.shape)} on {got.device}, "
                             f"want {want.dtype} {tuple(want.shape)} on cuda")
        if not torch.equal(flat_bytes(got, torch), flat_bytes(want, torch)):
            raise SystemExit(f"{arm}: {k}'s bytes differ from the file's")


def cudart_mapped():
    """The libcudart files mapped into this process."""
    try:
        return sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                       if "libcudart" in line.split()[-1]})
    except OSError:
        return []


def versions():
    import importlib.metadata as md
    out = []
    for p in ("torch", "safetensors", "fastsafetensors", "runai-model-streamer"):
        try:
            out.append(f"{p} {md.version(p)}")
        except md.PackageNotFoundError:
            out.append(f"{p} missing")
    return ", ".join(out)


def pick_dir(given):
    if given:
        return Path(given)
    for d in (os.environ.get("RINGSAFE_BENCH_DIR"), "/var/tmp", tempfile.gettempdir(), str(REPO)):
        if d and os.path.isdir(d) and os.access(d, os.W_OK) and fs_type(os.path.realpath(d)) not in ("tmpfs", "ramfs"):
            return Path(tempfile.mkdtemp(prefix="ringsafe-bench-gpu-", dir=d))
    return Path(tempfile.mkdtemp(prefix="ringsafe-bench-gpu-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=2.0, help="checkpoint size (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per arm and state (default 3)")
    ap.add_argument("--hot", action="store_true", help="page cache hot only")
    ap.add_argument("--cold", action="store_true", help="page cache cold only")
    ap.add_argument("--dir", help="where the checkpoint is written (default: a new folder, removed at the end, "
                                  "on a disk-backed file system: /var/tmp, then the temp dir)")
    ap.add_argument("--budget-s", type=float, default=0, help="start no new round after this many seconds (0: none)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 0.25 GiB, 1 repetition")
    a = ap.parse_args()
    if a.quick:
        a.size_gib, a.reps = 0.25, 1
    if a.reps < 1 or a.size_gib <= 0:
        ap.error("--reps must be >= 1 and --size-gib > 0")
    started = time.perf_counter()
    try:
        import torch
    except ImportError as e:
        print(f"skipped: torch is not importable ({e})")
        return 0
    if not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} sees no CUDA device (torch.version.cuda={torch.version.cuda})")
        return 0
    import safetensors.torch as st
    import ringsafe
    import ringsafe.torch as rt
    from ringsafe import _ringsafe
    peers = []
    for name, module in (("fastsafetensors", "fastsafetensors"), ("runai", "runai_model_streamer")):
        try:
            __import__(module)
            peers.append(name)
        except Exception as e:  # a peer's import can fail in many ways; it is then left out
            print(f"{name}: not importable ({type(e).__name__}: {e}); its arms are left out")
    states = [s for s, on in (("hot", a.hot or not a.cold), ("cold", a.cold or not a.hot)) if on]
    work = pick_dir(a.dir)
    keep = bool(a.dir)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"bench_gpu_{a.size_gib:g}gib.safetensors"
    try:
        if not path.exists():
            print(f"writing {path} ({fs_type(str(work.resolve()))}) with the reference's save_file ...", flush=True)
            make_checkpoint(path, a.size_gib, torch, st)
        header = read_header(path)
        size = path.stat().st_size
        fstype = fs_type(str(path.resolve()))
        if "cold" in states and fstype in ("tmpfs", "ramfs"):
            states.remove("cold")
            print(f"cold left out: {path} is on {fstype} (always in memory)")
        cuda = _ringsafe.cuda_runtime_available()
        props = torch.cuda.get_device_properties(0)
        print(f"GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs; "
              f"torch {torch.__version__} (CUDA {torch.version.cuda})")
        print(f"host: nproc {os.cpu_count()}, kernel {platform.release()}, python {platform.python_version()}; "
              f"{versions()}")
        print(f"ringsafe {ringsafe.__file__}: CUDA runtime {'loads' if cuda.available else 'NOT available: ' + cuda.reason}; "
              f"RINGSAFE_CUDART={os.environ.get('RINGSAFE_CUDART', '(unset)')}")
        print(f"checkpoint {path}: {size / 2**30:.2f} GiB, {len(header)} bf16 tensors, on {fstype}; "
              f"{drop_caches_note()}; cold = fsync + POSIX_FADV_DONTNEED per repetition", flush=True)

        golden = {k: v.to("cuda") for k, v in st.load_file(str(path)).items()}
        arms = Arms(path, header, torch, st, rt, peers)
        first, runs, failed = {}, {s: {arm: [] for arm in arms.table} for s in states}, {}

        def one(arm, state, record):
            if arm in failed:
                return
            if arm != CEILING:
                drop_cache(path) if state == "cold" else warm(str(path))
            arms.before(arm)
            try:
                seconds, result, release = arms.run(arm)
            except Exception as e:
                if arm in (FST, FST_BUF, RUNAI):  # a peer that fails here is reported, not fatal
                    failed[arm] = f"{type(e).__name__}: {e}"
                    print(f"{arm}: failed ({failed[arm]}); left out", flush=True)
                    return
                raise
            check(arm, result, golden, torch)
            if release:
                release()
            del result
            record(seconds)
            print(f"  {state} {arm}: {seconds:.3f} s", flush=True)  # what a killed run leaves

        # Each arm's first call (its time is not in the medians); ringsafe's arms must go
        # through the engine's staging pipeline, not their .to() fallback.
        for arm in arms.table:
            if arm in (MINE, MINE_ITER, MINE_MODEL):
                calls = []
                real = _ringsafe.read_to_device_at
                _ringsafe.read_to_device_at = lambda *a, **k: calls.append(1) or real(*a, **k)
                try:
                    one(arm, "hot", lambda s, arm=arm: first.__setitem__(arm, s))
                finally:
                    _ringsafe.read_to_device_at = real
                print(f"  {arm}: {len(calls)} engine read_to_device_at call(s)")
                if not calls:
                    raise SystemExit(f"{arm} did not read through the engine's staging pipeline (CUDA runtime: "
                                     f"{why or 'loads'})")
            else:
                one(arm, "hot", lambda s, arm=arm: first.__setitem__(arm, s))
        print(f"libcudart mapped in this process: {', '.join(cudart_mapped()) or 'none'}", flush=True)
        # Round after round, every arm hot then cold; the first round runs whole, a later one
        # stops at the arm where the budget ends (the n column shows what each median covers).
        plan = [(state, arm) for state in states for arm in arms.table if not (state == "cold" and arm == CEILING)]
        rounds, cut = 0, False
        while rounds < a.reps and not cut:
            for state, arm in plan:
                if rounds and a.budget_s and time.perf_counter() - started > a.budget_s:
                    cut = True
                    print(f"budget of {a.budget_s:g} s spent in round {rounds + 1} of {a.reps}", flush=True)
                    break
                one(arm, state, runs[state][arm].append)
            rounds += 1
        notes = []
        if "cold" in states:
            drop_cache(path)
            res = resident_fraction(str(path))
            notes.append(f"after a drop, {res:.0%} of the file is in the page cache (mincore)" if res is not None
                         else "residency after a drop: unknown (mincore failed)")
            rate = dd_direct(str(path))
            if rate:
                notes.append(f"dd iflag=direct bs=16M reads the file at {rate:.2f} GB/s (the disk's own rate, this run)")
        report(runs, first, failed, size, rounds, notes)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(runs, first, failed, size, rounds, notes):
    ceiling = statistics.median(runs["hot"][CEILING]) if runs.get("hot", {}).get(CEILING) else None
    print(f"\nmedians of n repetitions ({rounds} round(s)); GB = 1e9 bytes; the ceiling: "
          f"{size / ceiling / 1e9:.2f} GB/s" if ceiling else f"\nmedians of n repetitions ({rounds} round(s))")
    print("| cache | arm | n | median s | GB/s | of ceiling | vs ref device= | vs ref + .to | first call s |\n"
          "|---|---|---|---|---|---|---|---|---|")
    summary = {"size_bytes": size, "rounds": rounds, "ceiling_s": ceiling, "arms": {}}
    for state, by_arm in runs.items():
        med = {arm: statistics.median(v) for arm, v in by_arm.items() if v}
        for arm, m in med.items():
            of = f"{ceiling / m:.2f}" if ceiling else "-"
            vs_dev = f"{med[REF_DEV] / m:.2f}x" if REF_DEV in med and arm != CEILING else "-"
            vs_to = f"{med[REF_TO] / m:.2f}x" if REF_TO in med and arm != CEILING else "-"
            fc = f"{first[arm]:.3f}" if arm in first else "-"
            print(f"| {state} | {arm} | {len(by_arm[arm])} | {m:.3f} | {size / m / 1e9:.2f} | {of} | {vs_dev} | {vs_to} "
                  f"| {fc} |")
            summary["arms"][f"{state} {arm}"] = m
        peers = [med[p] for p in (FST, FST_BUF, RUNAI) if p in med]
        if MINE in med:
            line = f"{state}: ringsafe load_file(device=cuda) {med[REF_DEV] / med[MINE]:.2f}x the reference's device=cuda"
            if ceiling:
                line += f", {ceiling / med[MINE]:.2f} of the pinned H2D ceiling"
            if peers:
                line += f", {min(peers) / med[MINE]:.2f}x the best peer"
            print(line)
    for arm, why in failed.items():
        print(f"{arm}: failed, left out ({why})")
    for n in notes:
        print(n)
    print("targets (issue 34, judged by people, not by this script): hot >= 0.8 of the ceiling, "
          ">= 3x the reference's device=cuda, >= 1.0x the best peer")
    print("bench_gpu json: " + json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""ringsafe's Python API against the reference safetensors and the peers from
PyPI (Run:ai Model Streamer, fastsafetensors in its CPU mode, requests/boto3
download + load), on the loads people make, on a llama-like checkpoint (bf16
weights, f32 norms, TinyLlama's shapes, names model.layers.N.*) written once
with safetensors.torch.save_file.

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_python.py
      [--size-gib 2] [--reps 5] [--only load_file,load_model,...] [--hot | --cold]
      [--dir DIR] [--quick] [--save-gib 1] [--series 6] [--before BUILD_DIR]

Every repetition of every arm runs in a fresh Python process (clean allocator,
page-cache state and peak RSS); arms are interleaved, their order turning
each repetition (A B C, B C A, C A B, ...); the table gives medians and each
arm's ratio to the reference's mmap arm (for http and s3: to the download +
load arm). Operations (--only):

  load_file        X.load_file(path) then one read of every byte. Arms: the reference
                   (mmap, its default, and backend="pread"), ringsafe (the same two, and
                   iter_tensors: streaming with bounded memory, as the peers stream), Run:ai
                   (O_DIRECT, its default, and io_uring_buffered), fastsafetensors CPU
                   (O_DIRECT, its default, and FASTSAFETENSORS_ODIRECT=0); streamed tensors
                   are read as they arrive. Cold only: ringsafe pread and iter_tensors with
                   direct=True (they stay buffered otherwise)
  load_model       into an existing model's parameters, built as a constructed model has them
                   (torch.empty, then zeroed: every page written before the clock): the two
                   load_model()s (the reference's is load_file + load_state_dict); the peers copy
                   each streamed tensor into its parameter; cold only: ringsafe's with
                   direct=False
  read_into        into existing tensors (made as load_model's parameters): ringsafe.torch.read_into
                   against the reference's load_file + copy_ of each tensor
  loop             with safe_open(path, "pt"): get_tensor(k) for every key, read as it comes
  sharded          the checkpoint split into 4 shards + model.safetensors.index.json:
                   ringsafe.torch.load_file(index) against the reference's load_file per shard
  from_pretrained  transformers LlamaForCausalLM.from_pretrained(dir, dtype=bf16) on the same
                   bytes, with the reference, and with ringsafe.install() first
  pss              4 processes load the file at once and hold it: total PSS / file size
                   (reference mmap, ringsafe mmap, ringsafe pread)
  http             the file from a local nginx: ringsafe.torch.load_file(url) against
                   requests.get(url).content + safetensors.torch.load
  s3               the file from a local radosgw: ringsafe (s3://), Run:ai's S3 streamer,
                   boto3 get_object + safetensors.torch.load
  gs               the file from a local fake-gcs-server (STORAGE_EMULATOR_HOST): ringsafe (gs://),
                   google-cloud-storage download_as_bytes + load, Run:ai's GCS streamer
                   (CLOUD_STORAGE_EMULATOR_ENDPOINT)
  az               the file from the Azure Blob stand-in (tests/support/azure_blob_standin.py,
                   Shared Key via AZURE_STORAGE_CONNECTION_STRING): ringsafe (az://),
                   azure-storage-blob download_blob(max_concurrency=4) + load (no Run:ai arm: its
                   Azure backend has no endpoint setting that reaches a local server)
                   (--store-rate / --store-delay-ms model an object store's per-connection
                   rate and first byte for gs and az: the GCS stand-in proxies fake-gcs-server then)
  hf               the file from the Hub stand-in (tests/support/hub_standin.cpp: resolve 302 to an
                   nginx CDN; --store-rate is the CDN's limit_rate per connection, --store-delay-ms
                   the resolve endpoint's first byte), an empty Hub cache each repetition:
                   hf_hub_download + the reference's load_file (the first arm), HfFileSystem().open()
                   + safe_open, ringsafe load_file("hf://...") (its bytes checked against the Hub's
                   sha256 as they land), the same with verify=False, and with cache=True (it
                   writes the Hub cache as hf_hub_download does)
  hf_cached        the file already in the Hub cache: ringsafe load_file of the local file (the
                   first arm) against load_file("hf://...") (found in the cache, no request)
  hf_pretrained    LlamaForCausalLM.from_pretrained("bench/model") of transformers through the
                   stand-in against ringsafe.transformers.from_pretrained("hf://bench/model"),
                   dtype=bf16, an empty Hub cache each repetition
  select           `ringsafe load --json` (the CLI, a new process each time) of the whole file
                   against `--select` of evenly spaced layers making about 16 % of its bytes;
                   ratio = the selection's bytes per second / the whole file's, by the CLI's own
                   clock (open, headers, plan, reads) and by the process's wall time
  save_file        X.save_file(a --save-gib state dict in memory, a fresh path): the reference,
                   ringsafe with sync=False and with sync=True, and `dd oflag=direct bs=16M
                   conv=fsync` of as many bytes (the disk's sequential write rate, this run);
                   each child reports the time until the call returned and until the file
                   was on disk (fsync of it after the return)
  save_series      --series saves of that state dict in a row (fresh paths), then an fsync of
                   every file: the reference against ringsafe with sync=False; enough bytes
                   that the kernel's dirty-page limit throttles the writers

Cache states: "hot" = the file as written (the page cache as the writes left it, in
large folios where the kernel makes them; before the first repetition of an operation
the file is rewritten in place, its bytes read back with O_DIRECT, then synced), read
once (read(2)) before each repetition; "hot, read back" (load_file, load_model,
read_into, sharded, select) = evicted, then read once in 16 MiB read(2)s before the
first repetition (the page cache as a reader left it); "cold" = fsync +
POSIX_FADV_DONTNEED before each repetition ("guest-cold": the VM's host may still cache
it), checked with mincore(2).

"load s" = the call alone; "+ touch s" = the call and one read of every byte =
the int64 sum of every tensor's bytes (torch with one thread: both libraries pay it
equally, and two threads on two shared cores make it noisy); the arms' checksums must
agree; GB/s is of the file by "+ touch s". Streamed arms read as tensors arrive (no
"load s"). A `dd iflag=direct bs=16M` row gives the disk's own read rate in the same
run, and two cold-only baseline arms read the file on 8 threads into reused buffers,
through the page cache (the cost of filling it, which a mapped load also pays) and
with O_DIRECT. peak RSS = VmHWM minus the RSS after imports. GB = 1e9 bytes. The load
average is printed with every operation (other processes share the cores).
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from page_cache import drop_cache, warm
from safetensors_header import read_header

REPO = Path(__file__).resolve().parents[1]
OPS = ("load_file", "load_model", "read_into", "loop", "sharded", "from_pretrained", "pss", "http", "s3", "gs",
       "az", "hf", "hf_cached", "hf_pretrained", "select", "save_file", "save_series")
REF, REF_PREAD = "safetensors", "safetensors pread"
MINE, MINE_PREAD = "ringsafe", "ringsafe pread"
MINE_STREAM = "ringsafe iter_tensors"  # streaming with bounded memory, as the peers stream
# Cold only: the other choice of O_DIRECT, so each run shows what the default is
# worth: load_model reads a cold file with O_DIRECT (here direct=False), pread
# and iter_tensors stay buffered (here direct=True).
MINE_PREAD_DIRECT, MINE_STREAM_DIRECT = "ringsafe pread, direct=True", "ringsafe iter_tensors, direct=True"
MINE_BUF = "ringsafe, direct=False"
RUNAI, RUNAI_BUF = "runai O_DIRECT", "runai buffered"
FST, FST_BUF = "fastsafetensors O_DIRECT", "fastsafetensors buffered"
DOWNLOAD, BOTO, RUNAI_S3 = "requests + load", "boto3 + load", "runai s3"
WHOLE, SELECTION = "ringsafe load (CLI), whole file", "ringsafe load --select (CLI), ~16 % in scattered layers"
MINE_SYNC, DISK_WRITE = "ringsafe, sync=True", "dd oflag=direct bs=16M conv=fsync (the disk)"
GCS_DL, RUNAI_GS = "google-cloud-storage + load", "runai gs"
AZ_DL = "azure-storage-blob + load"
# The Hub (hf, hf_cached, hf_pretrained): the stand-in's repo bench/model.
HF_REF, HF_FS, MINE_HF, MINE_HF_CACHE = ("hf_hub_download + load_file", "HfFileSystem + safe_open", "ringsafe hf://",
                                         "ringsafe hf://, cache=True")
LOCAL, MINE_HF_CACHED = "ringsafe local file", "ringsafe hf:// (in the Hub cache)"
MINE_HF_UNVERIFIED = "ringsafe hf://, verify=False"  # the cost of checking the Hub's sha256 as the bytes land
TF_REF, MINE_TF = "transformers from_pretrained", "ringsafe.transformers.from_pretrained"
HF_REPO = "bench/model"
# --before BUILD_DIR: every ringsafe arm runs twice, interleaved, the second time as
# "ARM [before]" with another build's package and CLI (BUILD_DIR/engine/python,
# BUILD_DIR/tools/ringsafe): a change's speed against the code before it, in one run.
BEFORE, BEFORE_BUILD = " [before]", None
# Baselines, cold only: 8 threads read the file in 8 MiB pieces into buffers
# they reuse (no fresh memory, nothing kept), through the page cache (what
# filling the page cache costs, which a mapped load must also pay) and with
# O_DIRECT (plain parallel disk reads; a streamer may do better).
BASE_CACHE, BASE_DIRECT = "baseline: 8 x pread 8 MiB, page cache", "baseline: 8 x pread 8 MiB, O_DIRECT"
BASELINES = (BASE_CACHE, BASE_DIRECT)
COLD_ONLY = BASELINES + (MINE_PREAD_DIRECT, MINE_STREAM_DIRECT, MINE_BUF)
ARMS = {
    "load_file": [REF, REF_PREAD, MINE, MINE_PREAD, MINE_STREAM, RUNAI, RUNAI_BUF, FST, FST_BUF,
                  BASE_CACHE, BASE_DIRECT, MINE_PREAD_DIRECT, MINE_STREAM_DIRECT],
    "load_model": [REF, MINE, RUNAI_BUF, FST_BUF, MINE_BUF],
    "loop": [REF, MINE],
    "sharded": [REF, MINE],
    "from_pretrained": [REF, MINE],
    "pss": [REF, MINE, MINE_PREAD],
    "http": [DOWNLOAD, MINE],
    "s3": [BOTO, RUNAI_S3, MINE],
    "read_into": [REF, MINE, MINE_BUF],
    "gs": [GCS_DL, RUNAI_GS, MINE],
    # No Run:ai arm: its Azure backend (libstreamerazure.so) names no endpoint setting besides
    # AZURE_STORAGE_ACCOUNT_NAME/_KEY/_SAS_TOKEN (AZURE_STORAGE_ENDPOINT did not reach the
    # stand-in: "File access error"), so it would go to ACCOUNT.blob.core.windows.net.
    "az": [AZ_DL, MINE],
    "hf": [HF_REF, HF_FS, MINE_HF, MINE_HF_UNVERIFIED, MINE_HF_CACHE],
    "hf_cached": [LOCAL, MINE_HF_CACHED],
    "hf_pretrained": [TF_REF, MINE_TF],
    "select": [WHOLE, SELECTION],
    "save_file": [REF, MINE, MINE_SYNC, DISK_WRITE],
    "save_series": [REF, MINE],
}
# Remote or in-memory sources: one state.
NO_CACHE_STATE = ("save_file", "save_series", "http", "s3", "gs", "az", "pss", "hf", "hf_pretrained")
HUB_OPS = ("hf", "hf_cached", "hf_pretrained")
OPTIONAL_ARMS = (RUNAI_GS,)  # left out (with a note) when they cannot reach the local server
SAVES = ("save_file", "save_series")
# Ops that also run on the page cache as a reader leaves it (evicted, read back once).
READ_BACK = ("load_file", "load_model", "read_into", "sharded", "select")
STREAMED = (MINE_STREAM, MINE_STREAM_DIRECT, RUNAI, RUNAI_BUF, FST, FST_BUF, RUNAI_S3, RUNAI_GS, HF_FS)  # no "load s"
PEERS = {RUNAI: "runai_model_streamer", RUNAI_BUF: "runai_model_streamer", RUNAI_S3: "runai_model_streamer",
         RUNAI_GS: "runai_model_streamer", FST: "fastsafetensors", FST_BUF: "fastsafetensors", BOTO: "boto3",
         DOWNLOAD: "requests", GCS_DL: "google.cloud.storage", AZ_DL: "azure.storage.blob",
         HF_REF: "huggingface_hub", HF_FS: "huggingface_hub", TF_REF: "transformers"}

# TinyLlama-1.1B's shapes (22 layers: 2.2 GB, 201 tensors); the layer count follows --size-gib.
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


def layer_count(size_gib):
    per_layer = sum(2 * s[0] * (s[1] if len(s) > 1 else 2) for _, s, _ in layer_shapes(0))
    return max(1, -(-(int(size_gib * 2**30) - 2 * 2 * VOCAB * HIDDEN) // per_layer))


def make_checkpoint(work, size_gib):
    """The checkpoint (random bytes), its 4-shard split with an index, and a
    transformers model directory holding it; all written by the reference."""
    import torch
    import safetensors.torch as st
    g = torch.Generator().manual_seed(0)

    def rnd(shape):
        return torch.randint(-2**15, 2**15, shape, dtype=torch.int16, generator=g).view(torch.bfloat16)

    t = {"model.embed_tokens.weight": rnd((VOCAB, HIDDEN)), "lm_head.weight": rnd((VOCAB, HIDDEN)),
         "model.norm.weight": torch.ones(HIDDEN)}
    layers = layer_count(size_gib)
    for i in range(layers):
        for name, shape, kind in layer_shapes(i):
            t[name] = rnd(shape) if kind == "bf16" else torch.rand(shape, generator=g) + 0.5
    path = work / "model.safetensors"
    st.save_file(t, str(path) + ".part", metadata={"format": "pt"})
    os.replace(str(path) + ".part", path)
    shards = work / "sharded"
    shards.mkdir(exist_ok=True)
    names = list(t)
    weight_map = {}
    for k in range(4):
        part = {n: t[n] for n in names[k::4]}
        fname = f"model-{k + 1:05d}-of-00004.safetensors"
        st.save_file(part, str(shards / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    total = sum(v.numel() * v.element_size() for v in t.values())
    (shards / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    hf = work / "hf"
    hf.mkdir(exist_ok=True)
    from transformers import LlamaConfig
    LlamaConfig(hidden_size=HIDDEN, intermediate_size=INTER, num_attention_heads=32, num_key_value_heads=KV // 64,
                num_hidden_layers=layers, vocab_size=VOCAB, tie_word_embeddings=False,
                torch_dtype="bfloat16").save_pretrained(hf)
    if not (hf / "model.safetensors").exists():
        os.link(path, hf / "model.safetensors")


# ---------------------------------------------------------------- child side

def touch(t, torch):
    """One read of every byte: a vectorized int64 sum (uint8 where the size or
    the offset is not a multiple of 8), wrapping."""
    if not t.numel():
        return 0
    raw = t.detach().reshape(-1).view(torch.uint8)
    try:
        return int(raw.view(torch.int64).sum())
    except RuntimeError:
        return int(raw.sum())


def status_kib(field, pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def pss_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


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
        m.register_parameter(leaf, torch.nn.Parameter(torch.empty(info["shape"], dtype=dtypes[info["dtype"]]),
                                                      requires_grad=False))
    with torch.no_grad():
        for p in root.parameters():
            p.zero_()
    return root


def _runai_stream(paths, torch, each):
    from runai_model_streamer import SafetensorsStreamer
    with SafetensorsStreamer() as s:
        s.stream_files(paths)
        for name, t in s.get_tensors():
            each(name, t)


def _fst_stream(path, torch, each):
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    loader = SafeTensorsFileLoader(SingleGroup(), device="cpu", nogds=True)
    try:
        loader.add_filenames({0: [path]})
        fb = loader.copy_files_to_device()
        try:
            for name in read_header(path):
                each(name, fb.get_tensor(name))
        finally:
            fb.close()
    finally:
        loader.close()


def read_baseline(path, direct, threads=8, piece=8 << 20):
    """Reads the whole file on `threads` threads, `piece` bytes per read, each
    thread into one page-aligned buffer it reuses (no fresh memory)."""
    import mmap
    import threading
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    size = os.fstat(fd).st_size
    nxt = iter(range(0, size, piece))
    lock = threading.Lock()
    errors = []

    def work():
        buf = mmap.mmap(-1, piece)
        try:
            while True:
                with lock:
                    off = next(nxt, None)
                if off is None:
                    return
                os.preadv(fd, [buf], off)
        except OSError as e:
            errors.append(e)
        finally:
            buf.close()
    try:
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        os.close(fd)
    if errors:
        raise errors[0]


def save_state(path, gib, st):
    """The first tensors of the checkpoint, cloned, up to ``gib`` GiB: the state dict the saves write."""
    out, total = {}, 0
    with st.safe_open(path, "pt") as f:
        for k in f.keys():
            t = f.get_tensor(k).clone()
            if out and total + t.numel() * t.element_size() > gib * 2**30:
                break
            out[k] = t
            total += t.numel() * t.element_size()
    return out


def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_child(op, arm, path, work, torch, st, rt):
    """One timed save (or series of saves); returns the child's result fields."""
    prep = save_state(path, float(os.environ.get("BENCH_SAVE_GIB", "1")), st)
    count = int(os.environ.get("BENCH_SERIES", "6")) if op == "save_series" else 1
    targets = [work / f"saved-{os.getpid()}-{k}.safetensors" for k in range(count)]
    nbytes = sum(t.numel() * t.element_size() for t in prep.values())
    t0 = time.perf_counter()
    for target in targets:
        if arm == REF:
            st.save_file(prep, str(target))
        elif arm == MINE:
            rt.save_file(prep, str(target), sync=False)
        elif arm == MINE_SYNC:
            rt.save_file(prep, str(target), sync=True)
        else:  # the disk: as many bytes, sequential O_DIRECT writes of 16 MiB, then fsync
            subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=16M", f"count={-(-nbytes // (16 << 20))}",
                            "oflag=direct", "conv=fsync"], check=True, capture_output=True)
    returned = time.perf_counter() - t0
    for target in targets:
        fsync_path(target)
    on_disk = time.perf_counter() - t0
    size = sum(t.stat().st_size for t in targets)
    for target in targets:
        target.unlink()
    return {"seconds": returned, "touched": on_disk, "bytes": size,
            "check": None if arm == DISK_WRITE else size}


def child(op, arm, path, work):
    """One timed repetition in this fresh process; prints one JSON line."""
    if arm == RUNAI_BUF:
        os.environ["RUNAI_STREAMER_FS_STRATEGY"] = "io_uring_buffered"
    if arm == FST_BUF:
        os.environ["FASTSAFETENSORS_ODIRECT"] = "0"
    import torch
    torch.set_num_threads(1)
    import safetensors
    import safetensors.torch as st
    import ringsafe
    import ringsafe.torch as rt
    work = Path(work)
    if op in ("from_pretrained", "hf_pretrained"):
        if arm == MINE:
            ringsafe.install()
        import transformers
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    if op == "s3" and arm == BOTO:
        import boto3
    if op == "http":
        import requests
    with open("/proc/self/clear_refs", "w") as f:  # the imports' peak must not count
        f.write("5")
    base = status_kib("VmRSS")
    if op in SAVES:
        out = save_child(op, arm, path, work, torch, st, rt)
        out["peak_mib"] = (status_kib("VmHWM") - base) / 1024
        print(json.dumps(out))
        return
    if op == "pss":  # every process imported: the parent reads PSS, then says go
        print("ready", flush=True)
        sys.stdin.readline()
    prep = None
    if op in ("load_model", "read_into"):
        prep = build_model(json.loads((work / "header.json").read_text()), torch)
    backend = "pread" if arm in (REF_PREAD, MINE_PREAD, MINE_PREAD_DIRECT) else "mmap"
    kw = {"direct": arm != MINE_BUF} if arm in (MINE_PREAD_DIRECT, MINE_STREAM_DIRECT, MINE_BUF) else {}
    acc = [0]

    def each(_name, t):
        acc[0] += touch(t, torch)

    d = None  # what the load returned, touched after the clock's first reading
    t0 = time.perf_counter()
    if arm in BASELINES:
        read_baseline(path, arm == BASE_DIRECT)
        acc[0] = None
    elif op in ("load_file", "pss"):
        if arm in (REF, REF_PREAD):
            d = st.load_file(path, backend=backend)
        elif arm in (MINE, MINE_PREAD, MINE_PREAD_DIRECT):
            d = rt.load_file(path, backend=backend, **kw)
        elif arm in (MINE_STREAM, MINE_STREAM_DIRECT):
            for name, t in rt.iter_tensors(path, **kw):
                each(name, t)
        elif arm in (RUNAI, RUNAI_BUF):
            _runai_stream([path], torch, each)
        else:
            _fst_stream(path, torch, each)
    elif op == "load_model":
        params = prep.state_dict()
        if arm in (REF, MINE, MINE_BUF):
            (st if arm == REF else rt).load_model(prep, path, **kw)
        else:
            with torch.no_grad():
                (_runai_stream if arm == RUNAI_BUF else (lambda p, tr, e: _fst_stream(p[0], tr, e)))(
                    [path], torch, lambda n, t: params[n].copy_(t))
        d = dict(sorted(params.items()))
    elif op == "read_into":
        params = prep.state_dict()
        if arm == REF:
            loaded = st.load_file(path)
            with torch.no_grad():
                for k, v in loaded.items():
                    params[k].copy_(v)
            del loaded
        else:
            rt.read_into(path, params, **kw)
        d = dict(sorted(params.items()))
    elif op == "loop":
        with (safetensors if arm == REF else ringsafe).safe_open(path, "pt") as f:
            for k in f.keys():
                acc[0] += touch(f.get_tensor(k), torch)
    elif op == "sharded":
        shards = work / "sharded"
        if arm == REF:
            files = sorted(shards.glob("*.safetensors"))
            d = {}
            for f in files:
                d.update(st.load_file(str(f)))
        else:
            d = rt.load_file(str(shards / "model.safetensors.index.json"))
    elif op == "from_pretrained":
        model = transformers.LlamaForCausalLM.from_pretrained(str(work / "hf"), dtype=torch.bfloat16)
        d = dict(sorted(model.state_dict().items()))
    elif op == "http":
        url = (work / "http_url").read_text().strip()
        d = st.load(requests.get(url, timeout=600).content) if arm == DOWNLOAD else rt.load_file(url)
    elif op == "s3":
        bucket, key = "bench", "model.safetensors"
        if arm == BOTO:
            body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
            d = st.load(body)
        elif arm == RUNAI_S3:
            _runai_stream([f"s3://{bucket}/{key}"], torch, each)
        else:
            d = rt.load_file(f"s3://{bucket}/{key}")
    elif op in HUB_OPS:
        d = hub_child(op, arm, path, torch, st, rt, each)
    elif op in ("gs", "az"):
        bucket, key = "bench", "model.safetensors"
        if arm == GCS_DL:
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import storage
            client = storage.Client(project="bench", credentials=AnonymousCredentials())
            d = st.load(client.bucket(bucket).blob(key).download_as_bytes())
        elif arm == AZ_DL:
            from azure.storage.blob import BlobServiceClient
            svc = BlobServiceClient.from_connection_string(os.environ["AZURE_STORAGE_CONNECTION_STRING"])
            d = st.load(svc.get_blob_client(bucket, key).download_blob(max_concurrency=4).readall())
        elif arm == RUNAI_GS:
            _runai_stream([f"gs://{bucket}/{key}"], torch, each)
        else:
            d = rt.load_file(f"{op}://{bucket}/{key}")
    loaded = time.perf_counter() - t0
    if d is not None:
        for t in d.values():
            acc[0] += touch(t, torch)
    seconds = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    check = None if acc[0] is None else acc[0] & (2**64 - 1)
    out = {"seconds": None if arm in STREAMED or op == "loop" else loaded, "touched": seconds,
           "peak_mib": (peak - base) / 1024, "check": check}
    if op == "pss":  # hold the tensors until the parent has read every process's PSS
        print(json.dumps(out), flush=True)
        sys.stdin.readline()
        return
    print(json.dumps(out))


def hub_child(op, arm, path, torch, st, rt, each):
    """The timed part of one Hub arm (HF_ENDPOINT and HF_HUB_CACHE are set by the parent):
    the loaded tensors, or None when `each` saw them."""
    if op == "hf":
        if arm == HF_REF:
            from huggingface_hub import hf_hub_download
            return st.load_file(hf_hub_download(HF_REPO, "model.safetensors"))
        if arm == HF_FS:
            import ringsafe
            from huggingface_hub import HfFileSystem
            with HfFileSystem().open(f"{HF_REPO}/model.safetensors", "rb") as f, ringsafe.safe_open(f, "pt") as g:
                for k in g.keys():
                    each(k, g.get_tensor(k))
            return None
        kw = {"verify": False} if arm == MINE_HF_UNVERIFIED else {}  # (a --before build may not know verify=)
        return rt.load_file(f"hf://{HF_REPO}", cache=arm == MINE_HF_CACHE, **kw)
    if op == "hf_cached":
        return rt.load_file(path if arm == LOCAL else f"hf://{HF_REPO}")
    import transformers
    if arm == TF_REF:
        model = transformers.LlamaForCausalLM.from_pretrained(HF_REPO, dtype=torch.bfloat16)
    else:
        import ringsafe.transformers as rtf
        model = rtf.from_pretrained(f"hf://{HF_REPO}", dtype=torch.bfloat16)
    return dict(sorted(model.state_dict().items()))


# --------------------------------------------------------------- parent side

def rewrite(path, piece=64 << 20):
    """Leaves ``path`` in the page cache as freshly written: its bytes are read
    back with O_DIRECT (past the page cache, which is emptied first), written
    again in place in 64 MiB writes (the inode, and the hard link the
    transformers folder holds, stay), and synced. Where O_DIRECT is refused,
    the file is left as it is."""
    import mmap
    drop_cache(path)
    try:
        src = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return
    buf = mmap.mmap(-1, piece)
    dst = os.open(path, os.O_WRONLY)
    try:
        size = os.fstat(src).st_size
        for off in range(0, size, piece):
            n = os.preadv(src, [buf], off)
            os.pwrite(dst, memoryview(buf)[:min(n, size - off)], off)
        os.fsync(dst)
    finally:
        os.close(dst)
        os.close(src)
        buf.close()


def read_back(path):
    """Leaves ``path`` in the page cache as a reader leaves it: evicted, then read once in 16 MiB read(2)s."""
    drop_cache(path)
    warm(path)


def scattered_layers(header, share=0.16):
    """--select patterns for evenly spaced layers making about ``share`` of the
    checkpoint's bytes, and the bytes they select."""
    layers = sorted({int(n.split(".")[2]) for n in header if n.startswith("model.layers.")})
    size = {i: 0 for i in layers}
    for n, info in header.items():
        if n.startswith("model.layers."):
            size[int(n.split(".")[2])] += info["data_offsets"][1] - info["data_offsets"][0]
    total = sum(i["data_offsets"][1] - i["data_offsets"][0] for i in header.values())
    k = max(1, min(len(layers), round(share * total / (sum(size.values()) / len(layers)))))
    chosen = [layers[round(j * (len(layers) - 1) / max(k - 1, 1))] for j in range(k)] if k > 1 else [layers[0]]
    return [f"model.layers.{i}.*" for i in chosen], sum(size[i] for i in chosen)


def run_cli_load(path, patterns, build=None):
    """`ringsafe load --json [--select P]... path` in a new process (the CLI of `build`,
    default build/): the CLI's own seconds (open, headers, plan, reads), the process's
    wall time, and its bytes."""
    cli = Path(build or REPO / "build") / "tools" / "ringsafe"
    args = [str(cli), "load", "--json"] + [a for p in patterns for a in ("--select", p)] + [str(path)]
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"seconds": r["seconds"], "touched": wall, "bytes": r["bytes"], "peak_mib": 0, "check": None}


def resident_fraction(path):
    """Fraction of the file in the page cache (fincore), None if unknown."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) / os.path.getsize(path)
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


SAVE_ENV = {}  # BENCH_SAVE_GIB, BENCH_SERIES for the save children (set by main)


def child_env():
    env = dict(os.environ, **SAVE_ENV)
    if not env.get("PYTHONPATH"):
        env["PYTHONPATH"] = str(REPO / "build" / "engine" / "python")
    env.pop("RINGSAFE_AS_SAFETENSORS", None)
    return env


def run_child(op, arm, path, work, env=None):
    out = subprocess.run([sys.executable, __file__, "--child", op, arm, str(path), str(work)],
                         capture_output=True, text=True, env=env or child_env())
    if out.returncode:
        raise SystemExit(f"{op} / {arm} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_pss(arm, path, work, n=4, before=None):
    """n processes load the file at once and hold it. Their PSS is read with
    all n alive before the load (imports done) and after it: the summed
    growth (MiB) is what the loads added, as peak_mib. `before`: another build's package."""
    env = child_env()
    if before:
        env["PYTHONPATH"] = str(Path(before) / "engine" / "python")
    procs = [subprocess.Popen([sys.executable, __file__, "--child", "pss", arm, str(path), str(work)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(n)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        before = sum(pss_kib(p.pid) for p in procs)
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.stdout.readline()) for p in procs]
        wall = time.perf_counter() - t0
        added = (sum(pss_kib(p.pid) for p in procs) - before) / 1024
    finally:
        for p in procs:
            try:
                p.stdin.write("\n")
                p.stdin.close()
            except OSError:
                pass
            p.wait(timeout=120)
    return {"seconds": wall, "touched": wall, "peak_mib": added, "check": results[0]["check"],
            "pss_ratio": added * 2**20 / os.path.getsize(path)}


def dd_direct(path):
    """The disk's own sequential O_DIRECT rate (dd bs=16M), GB/s; None if dd refuses."""
    drop_cache(path)
    t0 = time.perf_counter()
    out = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"], capture_output=True)
    if out.returncode:
        return None
    return os.path.getsize(path) / (time.perf_counter() - t0) / 1e9


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
    versions = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m\n"
         "for p in ('torch', 'safetensors', 'runai-model-streamer', 'fastsafetensors', 'transformers'):\n"
         "    try: print(p, m.version(p))\n    except m.PackageNotFoundError: print(p, 'missing')"],
        capture_output=True, text=True, env=child_env()).stdout.split("\n")
    return (f"nproc {os.cpu_count()} ({cpu}), {mem / 2**20:.1f} GiB RAM, kernel {platform.release()}\n"
            f"THP enabled: {read('/sys/kernel/mm/transparent_hugepage/enabled')}; vm.dirty_ratio "
            f"{read('/proc/sys/vm/dirty_ratio')} %, dirty_background_ratio {read('/proc/sys/vm/dirty_background_ratio')} %\n"
            f"python {platform.python_version()}; {', '.join(v for v in versions if v)}; "
            f"load average {os.getloadavg()[0]:.2f}")


class Servers:
    """nginx and radosgw (tests/python/servers.py) for the http and s3 operations;
    fake-gcs-server (+ the GCS stand-in as a throttling proxy) and the Azure Blob
    stand-in for gs and az; the Hub stand-in (its nginx CDN throttled) for hf,
    hf_cached and hf_pretrained."""

    def __init__(self, work, path, ops, rate=0, delay_ms=0):
        sys.path.insert(0, str(REPO / "tests" / "python"))
        import servers
        self.nginx = self.rgw = self.gcs = self.gcs_front = self.az = self.hub = None
        self.env = None
        self.store_env = {}
        self.work = work
        if any(op in HUB_OPS for op in ops):
            self.hub = servers.HubStandin(work / "hub-root", work / "hub-run",
                                          cdn_extra=f"    limit_rate {rate};\n" if rate else "")
            files = {"model.safetensors": path}
            for name in ("config.json", "generation_config.json"):
                if (work / "hf" / name).exists():
                    files[name] = work / "hf" / name
            commit = self.hub.add_repo(HF_REPO, files)
            if delay_ms:
                self.hub.control(HF_REPO, "delay_ms", delay_ms)
            # hf_cached: the file in a Hub cache of its own (the blob a hard link of the checkpoint).
            repo = work / "hub-cache" / "models--bench--model"
            shutil.rmtree(work / "hub-cache", ignore_errors=True)
            (repo / "blobs").mkdir(parents=True)
            (repo / "snapshots" / commit).mkdir(parents=True)
            (repo / "refs").mkdir()
            os.link(path, repo / "blobs" / "bench-blob")
            os.symlink("../../blobs/bench-blob", repo / "snapshots" / commit / "model.safetensors")
            (repo / "refs" / "main").write_text(commit)
        throttle = ["--rate", str(rate), "--delay-ms", str(delay_ms)]
        if "gs" in ops:
            data = work / "gcs-data"
            (data / "bench").mkdir(parents=True, exist_ok=True)
            if not (data / "bench" / path.name).exists():
                os.link(path, data / "bench" / path.name)
            self.gcs = servers.FakeGcs(data, work)
            endpoint = self.gcs.endpoint
            if rate or delay_ms:
                self.gcs_front = servers.Standin("gcs_standin.py", ["--upstream", endpoint, *throttle], work)
                endpoint = self.gcs_front.url
            self.store_env["gs"] = dict(child_env(), STORAGE_EMULATOR_HOST=endpoint,
                                        CLOUD_STORAGE_EMULATOR_ENDPOINT=endpoint,
                                        RUNAI_STREAMER_GCS_USE_ANONYMOUS_CREDENTIALS="1")
        if "az" in ops:
            data = work / "az-data"
            (data / "bench").mkdir(parents=True, exist_ok=True)
            if not (data / "bench" / path.name).exists():
                os.link(path, data / "bench" / path.name)
            self.az = servers.Standin("azure_blob_standin.py", ["--data", data, "--key", servers.AZURE_DEV_KEY, *throttle],
                                      work)
            conn = (f"DefaultEndpointsProtocol=http;AccountName={servers.AZURE_DEV_ACCOUNT};"
                    f"AccountKey={servers.AZURE_DEV_KEY};BlobEndpoint={self.az.url}/{servers.AZURE_DEV_ACCOUNT};")
            self.store_env["az"] = dict(child_env(), AZURE_STORAGE_CONNECTION_STRING=conn,
                                        AZURE_STORAGE_ACCOUNT_NAME=servers.AZURE_DEV_ACCOUNT,
                                        AZURE_STORAGE_ACCOUNT_KEY=servers.AZURE_DEV_KEY)
        if "http" in ops:
            self.nginx = servers.Nginx(work, work / "nginx")
            (work / "http_url").write_text(self.nginx.url(path.name))
        if "s3" in ops:
            size = path.stat().st_size
            shutil.rmtree(work / "rgw", ignore_errors=True)  # a cluster starts from an empty folder
            self.rgw = servers.RadosgwCluster(work / "rgw", memstore_bytes=max(1 << 30, 2 * size + (512 << 20)))
            if self.rgw.create_bucket("bench") != 200 or self.rgw.put_object("bench", path.name, path) != 200:
                raise SystemExit("radosgw: could not store the checkpoint")
            self.env = dict(child_env(), **self.rgw.env(), AWS_EC2_METADATA_DISABLED="true",
                            RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0", AWS_S3_ADDRESSING_STYLE="path")

    def env_for(self, op):
        """The environment of one repetition's child (None: the default): for the Hub
        operations the stand-in as HF_ENDPOINT and a Hub cache, empty but for hf_cached."""
        if op == "s3":
            return self.env
        if op not in HUB_OPS:
            return self.store_env.get(op)
        cache = self.work / "hub-cache"
        if op != "hf_cached":
            cache = self.work / "hub-cache-cold"
            shutil.rmtree(cache, ignore_errors=True)
        return dict(child_env(), HF_ENDPOINT=self.hub.endpoint, HF_HUB_CACHE=str(cache),
                    HF_HOME=str(self.work / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
                    HF_HUB_DISABLE_PROGRESS_BARS="1")

    def close(self):
        for s in (self.nginx, self.rgw, self.gcs_front, self.gcs, self.az, self.hub):
            if s is not None:
                s.close()
        shutil.rmtree(self.work / "hub-cache-cold", ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=2.0, help="checkpoint size (default 2)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per arm (default 5)")
    ap.add_argument("--only", default=",".join(OPS), help="comma-separated operations (default: all)")
    ap.add_argument("--hot", action="store_true", help="page cache hot only (both hot states)")
    ap.add_argument("--cold", action="store_true", help="page cache cold only")
    ap.add_argument("--quick", action="store_true", help="smoke test: 0.5 GiB, 1 repetition, saves of 0.25 GiB x 2")
    ap.add_argument("--save-gib", type=float, default=1.0, help="state dict the saves write (default 1)")
    ap.add_argument("--series", type=int, default=6, help="saves in a row for save_series (default 6)")
    ap.add_argument("--store-rate", type=int, default=0,
                    help="gs/az/hf: bytes/s per response of the servers (hf: per CDN connection; default "
                         "0: unlimited)")
    ap.add_argument("--store-delay-ms", type=int, default=0,
                    help="gs/az: delay before each response header; hf: before each answer of the Hub's resolve "
                         "endpoint")
    ap.add_argument("--dir", help="where the checkpoint lives (kept and reused); default: a temporary "
                                  "directory removed at the end")
    ap.add_argument("--before", metavar="BUILD_DIR",
                    help="also run every ringsafe arm with another build (its engine/python and tools/ringsafe), "
                         "interleaved, as 'ARM [before]': speed before and after a change in one run")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.before:
        global BEFORE_BUILD
        BEFORE_BUILD = Path(a.before).resolve()
        if not (BEFORE_BUILD / "engine" / "python" / "ringsafe").is_dir():
            ap.error(f"--before {a.before}: no engine/python/ringsafe there (a ringsafe build directory)")
    if a.child:
        return child(*a.child)
    if a.make:
        return make_checkpoint(Path(a.make[0]), float(a.make[1]))
    if a.quick:
        a.size_gib, a.reps, a.save_gib, a.series = 0.5, 1, 0.25, 2
    ops = [o for o in a.only.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad or a.reps < 1 or a.series < 1 or a.save_gib <= 0:
        ap.error(f"unknown operation(s) {bad}; choose from {','.join(OPS)}" if bad else
                 "--reps and --series must be >= 1, --save-gib > 0")
    SAVE_ENV.update(BENCH_SAVE_GIB=str(a.save_gib), BENCH_SERIES=str(a.series))
    states = [s for s, on in (("hot", a.hot or not a.cold), ("hot, read back", a.hot or not a.cold),
                              ("cold", a.cold or not a.hot)) if on]
    work = Path(a.dir or tempfile.mkdtemp(prefix="ringsafe-bench-python-")).resolve()
    work = work / f"{a.size_gib:g}gib"
    work.mkdir(parents=True, exist_ok=True)
    servers = None
    try:
        path = work / "model.safetensors"
        if not (work / "hf" / "model.safetensors").exists():
            print(f"writing {work} with the reference's save_file ...", flush=True)
            if subprocess.run([sys.executable, __file__, "--make", str(work), str(a.size_gib)],
                              env=child_env()).returncode:
                raise SystemExit("writing the checkpoint failed")
        header = read_header(path)
        (work / "header.json").write_text(json.dumps(header))
        size = path.stat().st_size
        print(machine_facts())
        print(f"checkpoint {path}: {size / 2**30:.2f} GiB, {len(header)} tensors; median of {a.reps}, "
              f"every repetition a fresh process, arms interleaved in turning order; saves: {a.save_gib:g} GiB, series of "
              f"{a.series}\n", flush=True)
        print("command: " + " ".join([Path(sys.executable).name, "bench/bench_python.py"] + sys.argv[1:]) + "\n")
        servers = Servers(work, path, ops, a.store_rate, a.store_delay_ms)
        run_all(ops, states, a.reps, path, work, size, header, servers)
    finally:
        if servers is not None:
            servers.close()
        if not a.dir:
            shutil.rmtree(work.parent, ignore_errors=True)


def peer_missing(arm):
    import importlib.util
    mod = PEERS.get(arm)
    try:
        return mod is not None and importlib.util.find_spec(mod) is None
    except ModuleNotFoundError:  # its parent package is missing
        return True


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def run_all(ops, states, reps, path, work, size, header, servers):
    notes = []
    patterns, selected = scattered_layers(header)
    for op in ops:
        files = [path] if op != "sharded" else sorted((work / "sharded").glob("*.safetensors"))
        skipped = [a for a in ARMS[op] if peer_missing(a)]
        if skipped:
            notes.append(f"{op}: skipped {', '.join(skipped)} (not installed: bash tools/dev.sh bench installs it)")
        op_states = ["-"] if op in NO_CACHE_STATE else [s for s in states if s != "hot, read back" or op in READ_BACK]
        for state in op_states:
            arms = [a for a in ARMS[op] if (state == "cold" or a not in COLD_ONLY) and a not in skipped]
            if BEFORE_BUILD:
                arms = [b for a in arms for b in ((a, a + BEFORE) if a.startswith("ringsafe") else (a,))]
            load_before = os.getloadavg()[0]
            if state == "hot":
                for f in files:
                    rewrite(f)
            elif state == "hot, read back":
                for f in files:
                    read_back(f)
            runs = {arm: [] for arm in arms}
            failed = {}
            for rep in range(reps):
                # The order turns by one arm each repetition, so that every arm runs in every
                # position: what ran just before weighs on a save (the VM's free page
                # reporting decides which fresh pages are costly), and a fixed order gave one
                # arm the cheap position every time.
                for arm in arms[rep % len(arms):] + arms[:rep % len(arms)]:
                    base_arm = arm.removesuffix(BEFORE)
                    before = BEFORE_BUILD if base_arm != arm else None
                    if op in SAVES:
                        os.sync()  # earlier writes (and the discards of deleted outputs) out of the way
                    for f in files:
                        drop_cache(f) if state == "cold" else warm(f)
                    if op == "pss":
                        warm(path)
                        runs[arm].append(run_pss(base_arm, path, work, before=before))
                    elif op == "select":
                        runs[arm].append(run_cli_load(path, patterns if base_arm == SELECTION else [], before))
                    elif arm in failed:
                        continue
                    else:
                        env = servers.env_for(op)
                        if before:
                            env = dict(env or child_env(), PYTHONPATH=str(Path(before) / "engine" / "python"))
                        try:
                            runs[arm].append(run_child(op, base_arm, path, work, env))
                        except SystemExit as e:
                            if arm not in OPTIONAL_ARMS and not before:  # an older build may lack an option
                                raise
                            failed[arm] = str(e).strip().splitlines()[-1][:300]  # a peer that cannot reach the server
                            notes.append(f"{op}: {arm} did not run: {failed[arm]}")
            arms = [a for a in arms if a not in failed]
            if state == "cold":
                drop_cache(path)
                res = resident_fraction(path)
                if res is not None and res > 0.01:
                    notes.append(f"{op} cold: {res:.0%} of the file still cached after the drop")
                rate = dd_direct(path)
                if rate:
                    notes.append(f"{op} cold: dd iflag=direct bs=16M reads the file at {rate:.2f} GB/s "
                                 f"(the disk's own sequential rate in this run)")
            checks = {r["check"] for arm in arms for r in runs[arm] if r["check"] is not None}
            if len(checks) > 1 and op not in ("from_pretrained", "hf_pretrained"):
                raise SystemExit(f"{op} {state}: the arms disagree (checksums {sorted(checks)})")
            load_avg = f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
            if op in SAVES:
                print_saves(op, arms, runs, load_avg)
            elif op == "select":
                print_select(state, arms, runs, selected, size, load_avg)
            else:
                print_loads(op, state, arms, runs, size, load_avg)
            if BEFORE_BUILD:
                print_before(arms, runs, "seconds" if op == "select" else "touched")
    print(f"\nratio = first arm's median / this arm's (first arm: {REF} mmap; http/s3/gs/az: the download + load; "
          f"hf: {HF_REF}; hf_cached: {LOCAL}; hf_pretrained: {TF_REF})")
    print("pss: seconds = wall time until all 4 processes held the file; peak RSS column = PSS the 4 loads added, MiB")
    for n in notes:
        print(n)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share these cores)")


def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def print_loads(op, state, arms, runs, size, load_avg):
    print(f"\n{op}, {state} ({load_avg})\n"
          f"| arm | load s | + touch s | GB/s | peak RSS MiB | vs {arms[0]} (load) | vs {arms[0]} (+ touch) |\n"
          f"|---|---|---|---|---|---|---|", flush=True)
    base_load, base_all = median_of(runs[arms[0]], "seconds"), median_of(runs[arms[0]], "touched")
    for arm in arms:
        load, everything = median_of(runs[arm], "seconds"), median_of(runs[arm], "touched")
        rss = statistics.median(r["peak_mib"] for r in runs[arm])
        extra = ""
        if op == "pss":
            extra = f" (PSS added {statistics.median(r['pss_ratio'] for r in runs[arm]):.2f}x the file)"
        vs_load = f"{base_load / load:.2f}x" if load and base_load else "–"
        print(f"| {arm}{extra} | {fmt(load)} | {everything:.3f} | {size / everything / 1e9:.2f} | {rss:.0f} | "
              f"{vs_load} | {base_all / everything:.2f}x |", flush=True)
        print(f"|   (each: {' '.join(fmt(r['touched'], 2) for r in runs[arm])}) | | | | | | |")


def print_before(arms, runs, key):
    """Each ringsafe arm against itself in the --before build: median seconds, before / after."""
    for arm in arms:
        if arm.endswith(BEFORE) or arm + BEFORE not in arms:
            continue
        now, then = median_of(runs[arm], key), median_of(runs[arm + BEFORE], key)
        if now and then:
            print(f"|   {arm}: {then:.3f} s before, {now:.3f} s after: after is {then / now:.2f}x the speed "
                  f"of before | | | | | | |", flush=True)


def print_select(state, arms, runs, selected, size, load_avg):
    print(f"\nselect, {state} ({load_avg}): the selection is {selected / size:.1%} of the file\n"
          f"| arm | CLI s | process wall s | GB/s (CLI) | GB/s (wall) | per byte vs whole (CLI) | "
          f"per byte vs whole (wall) |\n|---|---|---|---|---|---|---|", flush=True)
    rate = {}
    for arm in arms:
        nbytes = runs[arm][0]["bytes"]
        cli, wall = median_of(runs[arm], "seconds"), median_of(runs[arm], "touched")
        rate[arm] = (nbytes / cli / 1e9, nbytes / wall / 1e9)
    for arm in arms:
        r = rate[arm]
        w = rate[arms[0]]
        print(f"| {arm} | {median_of(runs[arm], 'seconds'):.4f} | {median_of(runs[arm], 'touched'):.4f} | "
              f"{r[0]:.2f} | {r[1]:.2f} | {r[0] / w[0]:.2f}x | {r[1] / w[1]:.2f}x |", flush=True)
        print(f"|   (each, CLI: {' '.join(fmt(x['seconds'], 4) for x in runs[arm])}) | | | | | | |")


def print_saves(op, arms, runs, load_avg):
    nbytes = runs[arms[0]][0]["bytes"]
    print(f"\n{op}, {nbytes / 1e9:.2f} GB ({load_avg})\n"
          f"| arm | returned s | on disk s | GB/s returned | GB/s on disk | vs {arms[0]} (returned) | "
          f"vs {arms[0]} (on disk) |\n|---|---|---|---|---|---|---|", flush=True)
    rates = {}
    for arm in arms:
        n = runs[arm][0]["bytes"]  # dd writes whole 16 MiB blocks: a little more
        rates[arm] = (n / median_of(runs[arm], "seconds") / 1e9, n / median_of(runs[arm], "touched") / 1e9)
    for arm in arms:
        ret, disk = median_of(runs[arm], "seconds"), median_of(runs[arm], "touched")
        print(f"| {arm} | {ret:.3f} | {disk:.3f} | {rates[arm][0]:.2f} | {rates[arm][1]:.2f} | "
              f"{rates[arm][0] / rates[arms[0]][0]:.2f}x | {rates[arm][1] / rates[arms[0]][1]:.2f}x |", flush=True)
        each = " ".join(fmt(r["seconds"], 2) + "/" + fmt(r["touched"], 2) for r in runs[arm])
        print(f"|   (each, returned / on disk: {each}) | | | | | | |")
    if MINE_SYNC in arms and DISK_WRITE in arms:
        print(f"ringsafe sync=True, on disk, against the disk's sequential write rate (dd, this run): "
              f"{rates[MINE_SYNC][1] / rates[DISK_WRITE][1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

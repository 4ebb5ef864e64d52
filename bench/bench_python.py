#!/usr/bin/env python3
"""ringsafe's Python API against the reference safetensors and the peers from
PyPI (Run:ai Model Streamer, fastsafetensors in its CPU mode, requests/boto3
download + load), on the loads people make, on a llama-like checkpoint (bf16
weights, f32 norms, TinyLlama's shapes, names model.layers.N.*) written once
with safetensors.torch.save_file.

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_python.py
      [--size-gib 2] [--reps 3] [--only load_file,load_model,...] [--hot | --cold]
      [--dir DIR] [--quick]

Every repetition of every arm runs in a fresh Python process (clean allocator,
page-cache state and peak RSS); arms are interleaved (A B C A B C ...); the
table gives medians and each arm's ratio to the reference's mmap arm (for
http and s3: to the download + load arm). Operations (--only):

  load_file        X.load_file(path) then one read of every byte. Arms: the reference
                   (mmap, its default, and backend="pread"), ringsafe (the same two, and
                   iter_tensors: streaming with bounded memory, as the peers stream), Run:ai
                   (O_DIRECT, its default, and io_uring_buffered), fastsafetensors CPU
                   (O_DIRECT, its default, and FASTSAFETENSORS_ODIRECT=0); streamed tensors
                   are read as they arrive. Cold only: ringsafe pread and iter_tensors with
                   direct=True (they stay buffered otherwise)
  load_model       into an existing model's parameters (made with torch.empty, zeroed): the
                   two load_model()s; the peers copy each streamed tensor into its parameter;
                   cold only: ringsafe's with direct=False
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
                   + safe_open, ringsafe load_file("hf://...") and with cache=True (it writes the
                   Hub cache as hf_hub_download does)
  hf_cached        the file already in the Hub cache: ringsafe load_file of the local file (the
                   first arm) against load_file("hf://...") (found in the cache, no request)
  hf_pretrained    LlamaForCausalLM.from_pretrained("bench/model") of transformers through the
                   stand-in against ringsafe.transformers.from_pretrained("hf://bench/model"),
                   dtype=bf16, an empty Hub cache each repetition
  save_file        X.save_file(dict in memory, fresh path) (ringsafe with sync=False)

"One read of every byte" = the int64 sum of every tensor's bytes (torch with
one thread: both libraries pay it equally, and two threads on two shared cores
make it noisy); the arms' checksums must agree. hot: the file is read once
(read(2)) before each repetition; cold: fsync + POSIX_FADV_DONTNEED before each
repetition ("guest-cold": the VM's host may still cache it), checked with
mincore(2); a `dd iflag=direct bs=16M` row gives the disk's own rate in the
same run, and two cold-only baseline arms read the file on 8 threads into reused
buffers, through the page cache (the cost of filling it, which a mapped load
also pays) and with O_DIRECT. peak RSS = VmHWM minus the RSS after imports. GB = 1e9 bytes.
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
OPS = ("load_file", "load_model", "loop", "sharded", "from_pretrained", "pss", "http", "s3", "gs", "az", "save_file",
       "hf", "hf_cached", "hf_pretrained")
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
GCS_DL, RUNAI_GS = "google-cloud-storage + load", "runai gs"
AZ_DL = "azure-storage-blob + load"
# The Hub (hf, hf_cached, hf_pretrained): the stand-in's repo bench/model.
HF_REF, HF_FS, MINE_HF, MINE_HF_CACHE = ("hf_hub_download + load_file", "HfFileSystem + safe_open", "ringsafe hf://",
                                         "ringsafe hf://, cache=True")
LOCAL, MINE_HF_CACHED = "ringsafe local file", "ringsafe hf:// (in the Hub cache)"
TF_REF, MINE_TF = "transformers from_pretrained", "ringsafe.transformers.from_pretrained"
HF_REPO = "bench/model"
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
    "gs": [GCS_DL, RUNAI_GS, MINE],
    # No Run:ai arm: its Azure backend (libstreamerazure.so) names no endpoint setting besides
    # AZURE_STORAGE_ACCOUNT_NAME/_KEY/_SAS_TOKEN (AZURE_STORAGE_ENDPOINT did not reach the
    # stand-in: "File access error"), so it would go to ACCOUNT.blob.core.windows.net.
    "az": [AZ_DL, MINE],
    "save_file": [REF, MINE],
    "hf": [HF_REF, HF_FS, MINE_HF, MINE_HF_CACHE],
    "hf_cached": [LOCAL, MINE_HF_CACHED],
    "hf_pretrained": [TF_REF, MINE_TF],
}
NO_CACHE_STATE = ("save_file", "http", "s3", "gs", "az", "pss", "hf", "hf_pretrained")
HUB_OPS = ("hf", "hf_cached", "hf_pretrained")
OPTIONAL_ARMS = (RUNAI_GS,)  # left out (with a note) when they cannot reach the local server  # remote or in-memory sources: one state

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
    if op == "pss":  # every process imported: the parent reads PSS, then says go
        print("ready", flush=True)
        sys.stdin.readline()
    prep = None
    if op == "load_model":
        prep = build_model(json.loads((work / "header.json").read_text()), torch)
    elif op == "save_file":
        prep = {k: v.clone() for k, v in st.load_file(path).items()}
        target = work / f"saved-{os.getpid()}.safetensors"
    backend = "pread" if arm in (REF_PREAD, MINE_PREAD, MINE_PREAD_DIRECT) else "mmap"
    kw = {"direct": arm != MINE_BUF} if arm in (MINE_PREAD_DIRECT, MINE_STREAM_DIRECT, MINE_BUF) else {}
    acc = [0]

    def each(_name, t):
        acc[0] += touch(t, torch)

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
            d = None
            for name, t in rt.iter_tensors(path, **kw):
                each(name, t)
        elif arm in (RUNAI, RUNAI_BUF):
            d = None
            _runai_stream([path], torch, each)
        else:
            d = None
            _fst_stream(path, torch, each)
        if d is not None:
            for t in d.values():
                acc[0] += touch(t, torch)
    elif op == "load_model":
        params = prep.state_dict()
        if arm in (REF, MINE, MINE_BUF):
            (st if arm == REF else rt).load_model(prep, path, **kw)
        else:
            with torch.no_grad():
                (_runai_stream if arm == RUNAI_BUF else (lambda p, tr, e: _fst_stream(p[0], tr, e)))(
                    [path], torch, lambda n, t: params[n].copy_(t))
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
        for t in d.values():
            acc[0] += touch(t, torch)
    elif op == "from_pretrained":
        model = transformers.LlamaForCausalLM.from_pretrained(str(work / "hf"), dtype=torch.bfloat16)
        for _, p in sorted(model.state_dict().items()):
            acc[0] += touch(p, torch)
    elif op == "http":
        url = (work / "http_url").read_text().strip()
        d = st.load(requests.get(url, timeout=600).content) if arm == DOWNLOAD else rt.load_file(url)
        for t in d.values():
            acc[0] += touch(t, torch)
    elif op == "s3":
        bucket, key = "bench", "model.safetensors"
        if arm == BOTO:
            body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
            d = st.load(body)
        elif arm == RUNAI_S3:
            d = None
            _runai_stream([f"s3://{bucket}/{key}"], torch, each)
        else:
            d = rt.load_file(f"s3://{bucket}/{key}")
        if d is not None:
            for t in d.values():
                acc[0] += touch(t, torch)
    elif op in HUB_OPS:
        d = hub_child(op, arm, path, torch, st, rt, each)
        if d is not None:
            for t in d.values():
                acc[0] += touch(t, torch)
    elif op in ("gs", "az"):
        bucket, key = "bench", "model.safetensors"
        d = None
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
        if d is not None:
            for t in d.values():
                acc[0] += touch(t, torch)
    elif op == "save_file":
        if arm == REF:
            st.save_file(prep, target)
        else:
            rt.save_file(prep, target, sync=False)
    seconds = time.perf_counter() - t0
    peak = status_kib("VmHWM")
    check = None if acc[0] is None else acc[0] & (2**64 - 1)
    if op == "load_model":  # untimed: the parameters hold the file's bytes
        check = sum(touch(p, torch) for _, p in sorted(prep.state_dict().items())) & (2**64 - 1)
    elif op == "save_file":
        check = target.stat().st_size
        target.unlink()
    if op == "pss":  # hold the tensors until the parent has read every process's PSS
        print(json.dumps({"seconds": seconds, "peak_mib": (peak - base) / 1024, "check": check}), flush=True)
        sys.stdin.readline()
        return
    print(json.dumps({"seconds": seconds, "peak_mib": (peak - base) / 1024, "check": check}))


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
        return rt.load_file(f"hf://{HF_REPO}", cache=arm == MINE_HF_CACHE)
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
    env.pop("RINGSAFE_AS_SAFETENSORS", None)
    return env


def run_child(op, arm, path, work, env=None):
    out = subprocess.run([sys.executable, __file__, "--child", op, arm, str(path), str(work)],
                         capture_output=True, text=True, env=env or child_env())
    if out.returncode:
        raise SystemExit(f"{op} / {arm} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_pss(arm, path, work, n=4):
    """n processes load the file at once and hold it. Their PSS is read with
    all n alive before the load (imports done) and after it: the summed
    growth (MiB) is what the loads added, as peak_mib."""
    procs = [subprocess.Popen([sys.executable, __file__, "--child", "pss", arm, str(path), str(work)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env())
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
    return {"seconds": wall, "peak_mib": added, "check": results[0]["check"],
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
            f"THP enabled: {read('/sys/kernel/mm/transparent_hugepage/enabled')}\n"
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
    ap.add_argument("--reps", type=int, default=3, help="repetitions per arm (default 3)")
    ap.add_argument("--only", default=",".join(OPS), help="comma-separated operations (default: all)")
    ap.add_argument("--hot", action="store_true", help="page cache hot only")
    ap.add_argument("--cold", action="store_true", help="page cache cold only")
    ap.add_argument("--quick", action="store_true", help="smoke test: 0.5 GiB, 1 repetition")
    ap.add_argument("--store-rate", type=int, default=0,
                    help="gs/az/hf: bytes/s per response of the servers (hf: per CDN connection; default "
                         "0: unlimited)")
    ap.add_argument("--store-delay-ms", type=int, default=0,
                    help="gs/az: delay before each response header; hf: before each answer of the Hub's resolve "
                         "endpoint")
    ap.add_argument("--dir", help="where the checkpoint lives (kept and reused); default: a temporary "
                                  "directory removed at the end")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    if a.make:
        return make_checkpoint(Path(a.make[0]), float(a.make[1]))
    if a.quick:
        a.size_gib, a.reps = 0.5, 1
    ops = [o for o in a.only.split(",") if o]
    bad = [o for o in ops if o not in OPS]
    if bad or a.reps < 1:
        ap.error(f"unknown operation(s) {bad}; choose from {','.join(OPS)}" if bad else "--reps must be >= 1")
    states = [s for s, on in (("hot", a.hot or not a.cold), ("cold", a.cold or not a.hot)) if on]
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
              f"every repetition a fresh process, arms interleaved\n", flush=True)
        servers = Servers(work, path, ops, a.store_rate, a.store_delay_ms)
        run_all(ops, states, a.reps, path, work, size, servers)
    finally:
        if servers is not None:
            servers.close()
        if not a.dir:
            shutil.rmtree(work.parent, ignore_errors=True)


def run_all(ops, states, reps, path, work, size, servers):
    print(f"| operation | cache | arm | median s | GB/s | peak RSS MiB | vs {REF} |\n|---|---|---|---|---|---|---|",
          flush=True)
    notes = []
    for op in ops:
        arms = ARMS[op]
        files = [path] if op != "sharded" else sorted((work / "sharded").glob("*.safetensors"))
        for state in (["-"] if op in NO_CACHE_STATE else states):
            arms = [a for a in ARMS[op] if state == "cold" or a not in COLD_ONLY]
            runs = {arm: [] for arm in arms}
            failed = {}
            for _ in range(reps):
                for arm in arms:
                    for f in files:
                        drop_cache(f) if state == "cold" else warm(f)
                    if op == "pss":
                        warm(path)
                        runs[arm].append(run_pss(arm, path, work))
                    elif arm in failed:
                        continue
                    else:
                        env = servers.env_for(op)
                        try:
                            runs[arm].append(run_child(op, arm, path, work, env))
                        except SystemExit as e:
                            if arm not in OPTIONAL_ARMS:
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
            med = {arm: statistics.median(r["seconds"] for r in runs[arm]) for arm in arms}
            for arm in arms:
                rss = statistics.median(r["peak_mib"] for r in runs[arm])
                ratio = med[arms[0]] / med[arm]
                rate = size / med[arm] / 1e9
                extra = ""
                if op == "pss":
                    extra = f" (PSS added {statistics.median(r['pss_ratio'] for r in runs[arm]):.2f}x the file)"
                print(f"| {op} | {state} | {arm}{extra} | {med[arm]:.3f} | {rate:.2f} | {rss:.0f} | {ratio:.2f}x |",
                      flush=True)
    print(f"\nratio = first arm's median / this arm's (first arm: {REF} mmap; http/s3/gs/az: the download + load; "
          f"hf: {HF_REF}; hf_cached: {LOCAL}; hf_pretrained: {TF_REF})")
    print("pss: seconds = wall time until all 4 processes held the file; peak RSS column = PSS the 4 loads added, MiB")
    for n in notes:
        print(n)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes share these cores)")


if __name__ == "__main__":
    sys.exit(main())

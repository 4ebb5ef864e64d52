#!/usr/bin/env python3
"""Writing GGUF: ringsafe's save_file against gguf-py's GGUFWriter (issue 40's
first benchmark row), and GGUF (Q8_0) -> safetensors (bf16): `ringsafe cp
--dtype bfloat16` against gguf-py read + dequantize + the reference save_file.

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_gguf_write.py
      [--bytes 2147483648] [--convert-bytes 536870912] [--reps 3] [--dir DIR]

save_file: tensors of bf16 (64 tensors, `--bytes` in all) are made in a fresh
Python process per repetition and per arm, the arms' order turning with the
repetition; the clock covers the write until the file is durable:
  gguf-py    GGUFWriter: add_tensor for each, header, KV data, tensor infos,
             data, close(), then os.fsync of the file (what a durable copy needs)
  ringsafe   ringsafe._gguf_write.save_file (declared writer: exact header,
             pwrite from the tensors' memory, fsync, rename, directory fsync)
convert: a GGUF file of Q8_0 blocks (`--convert-bytes` of blocks, made once,
in the page cache) becomes a bf16 safetensors file, each arm a fresh process:
  gguf-py    GGUFReader, gguf.quants.dequantize of each tensor, torch's
             .to(bfloat16), safetensors.torch.save_file, os.fsync
  ringsafe   ringsafe cp SRC OUT.safetensors --dtype bfloat16 (fsync included)
Each line: median seconds over repetitions, GB/s of the output (10^9 bytes),
and ringsafe's ratio (gguf-py seconds / ringsafe seconds); with the peak RSS
(KiB) of each arm's process (save: including the tensors it made; convert:
the larger of the Python process and, for ringsafe, the cp it ran).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "build" / "tools" / "ringsafe"
TENSORS = 64


def make_tensors(total):
    import torch
    n = total // TENSORS // 2
    g = torch.Generator().manual_seed(1)
    return {f"blk.{i}.weight": torch.randn(n // 4096, 4096, generator=g).bfloat16() for i in range(TENSORS)}


def save_child(arm, total, out):
    tensors = make_tensors(total)
    import gguf  # both arms' imports before the clock
    from ringsafe._gguf_write import save_file
    t0 = time.perf_counter()
    if arm == "gguf-py":
        w = gguf.GGUFWriter(out, "llama")
        for name, t in tensors.items():
            w.add_tensor(name, t.view(__import__("torch").int16).numpy(), raw_dtype=gguf.GGMLQuantizationType.BF16)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        fd = os.open(out, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    else:
        save_file(tensors, out, {"general.architecture": "llama"})
    return time.perf_counter() - t0


def convert_child(arm, src, out):
    import gguf
    import torch
    from safetensors.torch import save_file
    t0 = time.perf_counter()
    if arm == "gguf-py":
        r = gguf.GGUFReader(src)
        out_t = {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type)).to(torch.bfloat16)
                 for t in r.tensors}
        save_file(out_t, out)
        fd = os.open(out, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    else:
        subprocess.run([str(CLI), "cp", src, out, "--dtype", "bfloat16"], check=True, capture_output=True)
    return time.perf_counter() - t0


def make_q8(path, total):
    import numpy as np
    import gguf
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import gguf_blocks
    w = gguf.GGUFWriter(path, "llama")
    rng = np.random.default_rng(2)
    per = total // TENSORS // 34 // 128 * 128  # blocks per tensor, 128 per row of 4096 elements
    for i in range(TENSORS):
        blocks = gguf_blocks.random_blocks("Q8_0", per, rng).reshape(per // 128, 128 * 34)
        w.add_tensor(f"blk.{i}.weight", blocks, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return per * TENSORS * 32 * 2  # output bytes (bf16)


def run_arms(kind, arms, reps, args_of, out_bytes):
    times = {a: [] for a in arms}
    rss = {a: 0 for a in arms}
    for k in range(reps):
        for arm in arms[k % len(arms):] + arms[: k % len(arms)]:
            p = subprocess.run([sys.executable, __file__, "--child", kind, arm, *args_of(arm)],
                               capture_output=True, text=True, check=True)
            secs, peak = p.stdout.strip().splitlines()[-1].split()
            times[arm].append(float(secs))
            rss[arm] = max(rss[arm], int(peak))
    base = statistics.median(times["gguf-py"])
    for arm in arms:
        s = statistics.median(times[arm])
        print(f"{kind:8} {arm:9} {s:8.3f} s {out_bytes / s / 1e9:6.2f} GB/s  ratio {base / s:5.2f}x  "
              f"peak RSS {rss[arm]} KiB (the process, with the tensors it made; cp's own)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=2 << 30)
    ap.add_argument("--convert-bytes", type=int, default=512 << 20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        kind, arm, *rest = args.child
        secs = save_child(arm, int(rest[0]), rest[1]) if kind == "save" else convert_child(arm, rest[0], rest[1])
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        print(secs, peak)
        return
    arms = ["gguf-py", "ringsafe"]
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        out = os.path.join(d, "out.gguf")
        run_arms("save", arms, args.reps, lambda arm: [str(args.bytes), out], args.bytes)
        os.unlink(out)
        src = os.path.join(d, "q8.gguf")
        out_bytes = make_q8(src, args.convert_bytes)
        out = os.path.join(d, "out.safetensors")
        run_arms("convert", arms, args.reps, lambda arm: [src, out], out_bytes)


if __name__ == "__main__":
    main()

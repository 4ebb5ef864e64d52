#!/usr/bin/env python3
"""Writing GGUF: ringsafe's save_file against gguf-py's GGUFWriter (issue 40's
first benchmark row), and GGUF (Q8_0) -> safetensors (bf16): `ringsafe cp
--dtype bfloat16` against gguf-py read + dequantize + the reference save_file.

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_gguf_write.py
      [--bytes 2147483648] [--convert-bytes 536870912] [--reps 3] [--dir DIR] [--only save,convert,merge]

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
merge: a 3-way split set (`--bytes` of bf16 tensors, gguf-split's names and
split.* keys, made once) becomes one file:
  cat        the three parts' bytes concatenated into one file (`cat A B C >
             OUT`), then fsync: the copy of the same bytes, at cat's speed
  ringsafe   ringsafe cp PART1 OUT.gguf (one pass, fsync included)
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


def merge_child(arm, first, out):
    t0 = time.perf_counter()
    if arm == "cat":
        parts = sorted(Path(first).parent.glob("split-*-of-*.gguf"))
        with open(out, "wb") as f:
            subprocess.run(["cat", *map(str, parts)], stdout=f, check=True)
            os.fsync(f.fileno())
    else:
        subprocess.run([str(CLI), "cp", first, out], check=True, capture_output=True)
    return time.perf_counter() - t0


def make_split(d, total):
    import numpy as np
    import gguf
    rng = np.random.default_rng(5)
    per = total // TENSORS // 2
    for p in range(3):
        w = gguf.GGUFWriter(os.path.join(d, f"split-{p + 1:05d}-of-00003.gguf"), "llama" if p == 0 else None)
        w.add_uint16("split.no", p)
        w.add_uint16("split.count", 3)
        w.add_int32("split.tensors.count", TENSORS // 3 * 3)
        for i in range(TENSORS // 3):
            data = rng.integers(0, 1 << 15, size=per, dtype=np.int16).reshape(-1, 4096)
            w.add_tensor(f"blk.{p}.{i}", data, raw_dtype=gguf.GGMLQuantizationType.BF16)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return os.path.join(d, "split-00001-of-00003.gguf"), per * 2 * (TENSORS // 3 * 3)


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
    base = statistics.median(times[arms[0]])
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
    ap.add_argument("--only", default="save,convert,merge")
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        kind, arm, *rest = args.child
        child = {"save": lambda: save_child(arm, int(rest[0]), rest[1]),
                 "convert": lambda: convert_child(arm, rest[0], rest[1]),
                 "merge": lambda: merge_child(arm, rest[0], rest[1])}[kind]
        secs = child()
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        print(secs, peak)
        return
    arms = ["gguf-py", "ringsafe"]
    only = args.only.split(",")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        if "save" in only:
            out = os.path.join(d, "out.gguf")
            run_arms("save", arms, args.reps, lambda arm: [str(args.bytes), out], args.bytes)
            os.unlink(out)
        if "convert" in only:
            src = os.path.join(d, "q8.gguf")
            out_bytes = make_q8(src, args.convert_bytes)
            out = os.path.join(d, "out.safetensors")
            run_arms("convert", arms, args.reps, lambda arm: [src, out], out_bytes)
            os.unlink(src)
            os.unlink(out)
        if "merge" in only:
            first, data_bytes = make_split(d, args.bytes)
            out = os.path.join(d, "merged.gguf")
            run_arms("merge", ["cat", "ringsafe"], args.reps, lambda arm: [first, out], data_bytes)


if __name__ == "__main__":
    main()

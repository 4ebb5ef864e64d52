#!/usr/bin/env python3
"""Dequantization speed: ringsafe's C++ dequantizer against gguf-py's
`gguf.quants.dequantize` and against a memcpy of the output bytes, in one
process, for Q4_K, Q6_K and Q8_0 to float32 and bfloat16 (issue 39's first
benchmark row).

  PYTHONPATH=build/engine/python .venv/bin/python bench/bench_dequant.py
      [--elements 33554432] [--reps 5] [--types Q4_K,Q6_K,Q8_0] [--outs F32,BF16]

Each repetition of each (type, output) case runs in a fresh Python process that
makes one tensor of random blocks with finite scales (tests/python/gguf_blocks.py)
and times, interleaved in an order that turns with the repetition:
  gguf-py     gguf.quants.dequantize(blocks, type) (float32, one thread, as
              transformers and GGUFReader users call it); for BF16 followed by
              torch's .to(torch.bfloat16) of its result, what such a user does next
  ringsafe 1t _ringsafe.dequantize(type, blocks, out_dtype, out=dst, threads=1)
  ringsafe    the same with threads=0 (one per CPU)
  memcpy      numpy.copyto of a buffer of the output's size into another
Destinations are allocated and written once before the clock (no first-touch
page faults in any arm; gguf-py allocates its own result, as its API does).
Each arm runs 3 times per process and keeps the median; the table gives the
median over repetitions: elements/s, output GB/s (10^9 bytes), and the ratios
ringsafe / gguf-py (target >= 10 for float32) and ringsafe output bytes/s /
memcpy bytes/s (target >= 0.5).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = ["gguf-py", "ringsafe 1t", "ringsafe", "memcpy"]


def child(type_name, out, elements, order):
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import numpy as np
    import gguf_blocks
    from gguf import GGMLQuantizationType, quants
    from ringsafe import _ringsafe

    block_size, type_size = gguf_blocks.LAYOUT[type_name]
    n_blocks = elements // block_size
    elements = n_blocks * block_size
    blocks = gguf_blocks.random_blocks(type_name, n_blocks, np.random.default_rng(7)).reshape(1, -1)
    out_size = 4 if out == "F32" else 2
    dst = np.ones(elements * out_size, dtype=np.uint8)
    src = np.ones(elements * out_size, dtype=np.uint8)
    copy_dst = np.ones(elements * out_size, dtype=np.uint8)
    qtype = GGMLQuantizationType[type_name]

    def gguf_py():
        values = quants.dequantize(blocks, qtype)
        if out == "BF16":
            import torch
            torch.from_numpy(values).to(torch.bfloat16)

    run = {
        "gguf-py": gguf_py,
        "ringsafe 1t": lambda: _ringsafe.dequantize(type_name, blocks, out, out=dst, threads=1),
        "ringsafe": lambda: _ringsafe.dequantize(type_name, blocks, out, out=dst, threads=0),
        "memcpy": lambda: np.copyto(copy_dst, src),
    }
    if out == "BF16":
        import torch  # noqa: F401  (imported before the clock)
    times = {arm: [] for arm in order}
    for _ in range(3):
        for arm in order:
            t0 = time.perf_counter()
            run[arm]()
            times[arm].append(time.perf_counter() - t0)
    result = {arm: statistics.median(ts) for arm, ts in times.items()}
    result["elements"] = elements
    result["out_bytes"] = elements * out_size
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=32 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--types", default="Q4_K,Q6_K,Q8_0")
    ap.add_argument("--outs", default="F32,BF16")
    ap.add_argument("--child", nargs=4, metavar=("TYPE", "OUT", "ELEMENTS", "ORDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        t, o, n, order = args.child
        child(t, o, int(n), order.split(","))
        return

    cases = [(t, o) for t in args.types.split(",") for o in args.outs.split(",")]
    results = {c: [] for c in cases}
    for rep in range(args.reps):
        for i, (t, o) in enumerate(cases):
            k = (rep + i) % len(ARMS)
            order = ARMS[k:] + ARMS[:k]
            p = subprocess.run([sys.executable, __file__, "--child", t, o, str(args.elements), ",".join(order)],
                               capture_output=True, text=True, check=True)
            results[(t, o)].append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr)

    print(f"dequantize, {args.elements} elements, {args.reps} repetitions (fresh process each), medians")
    print("| type | out | gguf-py Melem/s | ringsafe 1t Melem/s | ringsafe Melem/s | ringsafe out GB/s | "
          "memcpy GB/s | ringsafe / gguf-py | 1t / gguf-py | out bytes/s / memcpy |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (t, o), runs in results.items():
        med = {arm: statistics.median(r[arm] for r in runs) for arm in ARMS}
        n, nbytes = runs[0]["elements"], runs[0]["out_bytes"]
        ratio_ref = statistics.median(r["gguf-py"] / r["ringsafe"] for r in runs)
        ratio_1t = statistics.median(r["gguf-py"] / r["ringsafe 1t"] for r in runs)
        ratio_copy = statistics.median(r["memcpy"] / r["ringsafe"] for r in runs)
        print(f"| {t} | {o} | {n / med['gguf-py'] / 1e6:.0f} | {n / med['ringsafe 1t'] / 1e6:.0f} | "
              f"{n / med['ringsafe'] / 1e6:.0f} | {nbytes / med['ringsafe'] / 1e9:.2f} | "
              f"{nbytes / med['memcpy'] / 1e9:.2f} | {ratio_ref:.1f}x | {ratio_1t:.1f}x | {ratio_copy:.2f}x |")


if __name__ == "__main__":
    main()

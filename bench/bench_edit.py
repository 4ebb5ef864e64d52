"""`ringsafe edit --set` of a string on a GGUF file against gguf-py's
gguf_new_metadata (which writes a whole new copy with the new metadata).

Arms, interleaved, each a new process on the same hot file (page cache):
  in place   ringsafe edit FILE --set general.name=...  (the file has room: header bytes only)
  rewrite    ringsafe edit FILE --set ... --rewrite      (one pass to a temporary, fsync, rename)
  gguf-py    python -m gguf.scripts.gguf_new_metadata FILE OUT --general-name ...
Prints each arm's median and the ratios against gguf-py.

    PYTHONPATH=build/engine/python .venv/bin/python bench/bench_edit.py --size-gib 2 --reps 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ringsafe.gguf

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "build" / "tools" / "ringsafe"


def make_file(path: Path, size_gib: float) -> None:
    """A GGUF file of F16 tensors of 64 MiB each, about size_gib GiB in all."""
    n = max(1, int(size_gib * 1024 / 64))
    rng = np.random.default_rng(0)
    block = rng.standard_normal(32 << 20, dtype=np.float32).astype(np.float16)  # 64 MiB
    tensors = {f"blk.{i}.weight": block.reshape(4096, 8192) for i in range(n)}
    ringsafe.gguf.save_file(tensors, str(path), {"general.architecture": "llama", "general.name": "bench"})


def timed(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    a = ap.parse_args()
    if not CLI.exists():
        print(f"bench_edit: {CLI} is not built", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        src, out = Path(d) / "m.gguf", Path(d) / "out.gguf"
        make_file(src, a.size_gib)
        size = src.stat().st_size
        # The file written by save_file has no padding entry: the first edit rewrites it with room.
        _, first = timed([str(CLI), "edit", str(src), "--set", "general.name=first edit, so the file gets room"])
        print(f"file {size / 2**30:.2f} GiB; first edit: {first.strip()}")
        times: dict[str, list[float]] = {"in place": [], "rewrite": [], "gguf-py": []}
        for rep in range(a.reps):
            name = f"name-{rep}-" + "x" * (rep * 7)
            t, said = timed([str(CLI), "edit", str(src), "--set", f"general.name={name}"])
            if "in place" not in said:
                print(f"bench_edit: expected an in-place edit, got: {said.strip()}", file=sys.stderr)
                return 1
            times["in place"].append(t)
            t, _ = timed([str(CLI), "edit", str(src), "--set", f"general.name={name}r", "--rewrite"])
            times["rewrite"].append(t)
            t, _ = timed([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--force",
                          "--general-name", name, str(src), str(out)])
            times["gguf-py"].append(t)
            os.unlink(out)
        base = statistics.median(times["gguf-py"])
        print(f"{'arm':10} {'median s':>10} {'vs gguf-py':>11}")
        for arm, ts in times.items():
            m = statistics.median(ts)
            print(f"{arm:10} {m:10.4f} {base / m:10.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

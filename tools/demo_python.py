#!/usr/bin/env python3
"""The Python half of `bash tools/dev.sh demo`: ringsafe's Python API beside the
reference `safetensors` on a ~1 GiB checkpoint, page cache hot, median of 3.

Both libraries' loads are followed by one read of every byte: safetensors 0.8
returns lazy mmap-backed tensors, so its load alone moves no data."""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import ringsafe
import ringsafe.torch as rs
import safetensors.torch as st

LAYERS, HIDDEN = 12, 1024  # ~1 GiB of bf16/f32 in llama-like tensors


def checkpoint():
    g = torch.Generator().manual_seed(0)
    out = {"model.embed_tokens.weight": torch.randn(32000, HIDDEN // 2, generator=g).to(torch.bfloat16)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (HIDDEN, HIDDEN)), ("self_attn.k_proj", (HIDDEN, HIDDEN)),
                            ("self_attn.v_proj", (HIDDEN, HIDDEN)), ("self_attn.o_proj", (HIDDEN, HIDDEN)),
                            ("mlp.gate_proj", (4 * HIDDEN, HIDDEN)), ("mlp.up_proj", (4 * HIDDEN, HIDDEN)),
                            ("mlp.down_proj", (HIDDEN, 4 * HIDDEN))):
            out[p + name + ".weight"] = torch.randn(*shape, generator=g)
        out[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
    return out


def touch(tensors):
    """One read of every byte, the same for both libraries (a vectorized int64 sum)."""
    total = 0
    for t in tensors.values():
        if t.numel():
            raw = t.reshape(-1).view(torch.uint8)
            try:
                total += int(raw.view(torch.int64).sum())
            except RuntimeError:  # size or offset not a multiple of 8
                total += int(raw.sum())
    return total


def median_seconds(fn, reps=3):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    with tempfile.TemporaryDirectory(prefix="ringsafe-pydemo-") as d:
        path = Path(d) / "sample.safetensors"
        tensors = checkpoint()
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        print(f"python: {len(tensors)} tensors, {size / 2**30:.2f} GiB, torch {torch.__version__}")
        t0 = time.perf_counter()
        rs.save_file(tensors, path)
        print(f"  ringsafe.torch.save_file: {size / (time.perf_counter() - t0) / 1e9:.2f} GB/s "
              f"(byte-identical to safetensors.torch.save_file)")
        model = torch.nn.Module()
        for k, v in tensors.items():
            model.register_buffer(k.replace(".", "_"), torch.zeros_like(v))
        del tensors
        model_path = Path(d) / "model.safetensors"
        st.save_file({k.replace(".", "_"): v for k, v in rs.load_file(path).items()}, model_path)
        rs.load_file(path)  # page cache hot for every arm

        rows = [
            ("load_file + read every byte", lambda: touch(st.load_file(path)), lambda: touch(rs.load_file(path))),
            ("load_model (into existing params)", lambda: st.load_model(model, model_path),
             lambda: rs.load_model(model, model_path)),
        ]
        print(f"\n  {'operation (hot, median of 3)':36} {'safetensors':>12} {'ringsafe':>12} {'speed-up':>9}")
        for name, ref, mine in rows:
            r, m = median_seconds(ref), median_seconds(mine)
            print(f"  {name:36} {size / r / 1e9:9.2f} GB/s {size / m / 1e9:7.2f} GB/s {r / m:8.2f}x")

        a, b = rs.load_file(path), st.load_file(path)
        same = all(torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8)) for k in b)
        print(f"\n  bytes identical between the two loads: {'yes' if same else 'NO'}")
        with ringsafe.safe_open(path, framework="pt") as f:
            rows4 = f.get_slice("model.layers.0.mlp.up_proj.weight")[100:104, ::256]
            print(f"  get_slice(...up_proj.weight)[100:104, ::256] -> shape {tuple(rows4.shape)}, "
                  f"read only rows 100-103")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

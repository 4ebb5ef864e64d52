#!/usr/bin/env python3
"""The Python half of `bash tools/dev.sh demo` (run after the C++ demo):
ringsafe's Python API beside the reference `safetensors` package on a ~1 GiB
llama-like sample checkpoint, in this process, page cache hot.

  PYTHONPATH=build/engine/python .venv/bin/python tools/scripts/demo_python.py [--dir DIR] [--keep]

It writes the checkpoint with ringsafe.torch.save_file (and a copy with the
reference's, to compare the files byte for byte), loads it with both
load_file (median of 3; each load followed by one read of every byte, because
safetensors returns lazy mmap-backed tensors whose bytes move only when read),
loads it into an existing model with both load_model, reads a few rows with
get_slice, checks every byte, and removes its temporary directory."""

import argparse
import filecmp
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import ringsafe
import ringsafe.torch as rs
import safetensors
import safetensors.torch as st

LAYERS, HIDDEN, INTER, VOCAB = 30, 1024, 4096, 32000  # 273 tensors, ~1 GiB (bf16 weights, f32 norms)
REPS = 3


def sample_tensors():
    """Llama-like names and shapes; the bf16 values are windows of one random
    pool (generating 1 GiB of random numbers would take longer than the demo)."""
    g = torch.Generator().manual_seed(0)
    pool = torch.randn(8 << 20, generator=g).to(torch.bfloat16)
    cursor = 0

    def weight(*shape):
        nonlocal cursor
        out = torch.empty(shape, dtype=torch.bfloat16)
        flat, pos = out.view(-1), 0
        while pos < flat.numel():
            start = cursor % pool.numel()
            k = min(flat.numel() - pos, pool.numel() - start)
            flat[pos:pos + k] = pool[start:start + k]
            pos += k
            cursor += k
        cursor += 4099  # each tensor starts elsewhere in the pool
        return out

    t = {"model.embed_tokens.weight": weight(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[p + "self_attn." + name + ".weight"] = weight(HIDDEN, HIDDEN)
        t[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        t[p + "mlp.gate_proj.weight"] = weight(INTER, HIDDEN)
        t[p + "mlp.up_proj.weight"] = weight(INTER, HIDDEN)
        t[p + "mlp.down_proj.weight"] = weight(HIDDEN, INTER)
    t["model.norm.weight"] = torch.ones(HIDDEN)
    t["lm_head.weight"] = weight(VOCAB, HIDDEN)
    return t


def empty_model(tensors):
    """An nn.Module tree whose parameters have the checkpoint's names, shapes and
    dtypes (torch.empty, then zeroed: an existing model's memory is resident)."""
    root = torch.nn.Module()
    for name, t in tensors.items():
        *path, leaf = name.split(".")
        m = root
        for part in path:
            if part not in m._modules:
                m.add_module(part, torch.nn.Module())
            m = m._modules[part]
        m.register_parameter(leaf, torch.nn.Parameter(torch.zeros_like(t), requires_grad=False))
    return root


def read_every_byte(tensors):
    """One read of every byte (a vectorized sum of the bytes as int64), the same for both libraries."""
    total = 0
    for t in tensors.values():
        raw = t.reshape(-1).view(torch.uint8)
        total += int(raw.view(torch.int64).sum()) if raw.numel() % 8 == 0 else int(raw.sum())
    return total


def seconds(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="where to write the sample (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the sample files")
    a = ap.parse_args()
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="ringsafe-pydemo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return demo(work)
    finally:
        if not a.keep:
            for name in ("sample.safetensors", "sample-reference.safetensors"):
                (work / name).unlink(missing_ok=True)
            if not a.dir:
                shutil.rmtree(work, ignore_errors=True)


def demo(work):
    print(f"Python: ringsafe vs the reference (safetensors {safetensors.__version__}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")
    tensors = sample_tensors()
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    path, ref_path = work / "sample.safetensors", work / "sample-reference.safetensors"
    print(f"sample checkpoint: {len(tensors)} tensors, {size / 2**30:.2f} GiB (bf16 weights, f32 norms), {path}")

    rows = []
    mine_s = seconds(lambda: rs.save_file(tensors, path))
    ref_s = seconds(lambda: st.save_file(tensors, ref_path))
    rows.append(("save_file (no fsync, 1 run)", ref_s, mine_s))
    identical_files = filecmp.cmp(path, ref_path, shallow=False)
    ref_path.unlink()

    model = empty_model(tensors)
    del tensors
    rs.load_file(path)  # the page cache holds the file for every arm (it was just written, too)

    # Arms alternate (reference, ringsafe, reference, ...); every result is dropped before the next.
    times = {"load_file": ([], []), "load_model": ([], [])}
    for _ in range(REPS):
        times["load_file"][0].append(seconds(lambda: read_every_byte(st.load_file(path))))
        times["load_file"][1].append(seconds(lambda: read_every_byte(rs.load_file(path))))
        times["load_model"][0].append(seconds(lambda: st.load_model(model, path)))
        times["load_model"][1].append(seconds(lambda: rs.load_model(model, path)))
    rows.append(("load_file + read every byte", *map(statistics.median, times["load_file"])))
    rows.append(("load_model into an existing model", *map(statistics.median, times["load_model"])))

    print(f"\n  {f'page cache hot, median of {REPS}':34} {'safetensors':>12} {'ringsafe':>12} {'speed-up':>9}")
    for name, ref, mine in rows:
        print(f"  {name:34} {size / ref / 1e9:7.2f} GB/s {size / mine / 1e9:7.2f} GB/s {ref / mine:8.2f}x")
    print("  GB = 1e9 bytes; speed-up = safetensors time / ringsafe time. Both load_files hand out views of\n"
          "  the page cache's own pages, mapped (ringsafe maps them on both cores before it returns; the\n"
          "  reference on first touch); load_model reads straight into the model's memory.")

    mine, ref = rs.load_file(path), st.load_file(path)
    loads_equal = mine.keys() == ref.keys() and all(same_bytes(mine[k], ref[k]) for k in ref)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    rs.load_model(model, path)
    state = model.state_dict()
    model_equal = all(same_bytes(state[k], ref[k]) for k in ref)

    name = "model.layers.0.self_attn.q_proj.weight"
    with ringsafe.safe_open(path, framework="pt") as f:
        part = f.get_slice(name)[100:103, :6]
        shape = f.get_slice(name).get_shape()
    slice_equal = same_bytes(part, ref[name][100:103, :6])
    print(f"\nget_slice('{name}')[100:103, :6] (file shape {shape}, reads only the rows it needs):")
    for row in part.float().tolist():
        print("  [" + ", ".join(f"{v:7.4f}" for v in row) + "]")

    checks = [("ringsafe.save_file's file == safetensors.save_file's file, byte for byte", identical_files),
              ("ringsafe.load_file == safetensors.load_file, every tensor's bytes", loads_equal),
              ("a zeroed model's parameters after ringsafe.load_model == the file's tensors", model_equal),
              ("the get_slice rows == the same rows of the whole tensor", slice_equal)]
    print()
    for text, ok in checks:
        print(f"  {'yes' if ok else 'NO '}  {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

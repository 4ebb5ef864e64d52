"""The C++ dequantizer through `_ringsafe.dequantize` (dequantize_binding.cpp):

- random blocks with finite scales of every type gguf-py 0.19.0 dequantizes:
  float32 values bit-identical to `gguf.quants.dequantize` (hypothesis), and
  on blocks of arbitrary bytes too (NaNs compared as NaN);
- float16 and bfloat16 outputs bit-identical to torch's `.to()` of those
  float32 values, special values included;
- the GGUF corpus's ggml hashes, also for the types gguf-py cannot dequantize;
- named errors (SafetensorError with .kind) with the destination untouched,
  writes into caller buffers of every kind, and Ctrl-C during a long call.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ringsafe import _ringsafe

import gguf_blocks

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType, quants  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "conformance-gguf" / "valid"

# Types both sides dequantize: gguf-py 0.19.0 has no Q8_K, Q1_0 or Q2_0 (the corpus's hashes check those).
GGUF_PY_TYPES = [t for t in gguf_blocks.LAYOUT if t in GGMLQuantizationType.__members__
                 and t not in ("Q8_K", "Q1_0")]
SLOW_OK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(type_name, blocks):
    block_size = gguf_blocks.LAYOUT[type_name][0]
    data = blocks.reshape(1, -1) if block_size > 1 else blocks
    return np.asarray(quants.dequantize(data, GGMLQuantizationType[type_name]), dtype=np.float32).reshape(-1)


def ours(type_name, blocks, out="F32", threads=0):
    dt = {"F32": np.float32, "F16": np.uint16, "BF16": np.uint16}[out]
    return np.frombuffer(_ringsafe.dequantize(type_name, blocks, out, threads=threads), dtype=dt)


@SLOW_OK
@given(type_name=st.sampled_from(GGUF_PY_TYPES), n_blocks=st.integers(1, 48), seed=st.integers(0, 2**32 - 1),
       threads=st.sampled_from([1, 2, 0]))
def test_random_blocks_with_finite_scales_match_gguf_py_bit_for_bit(type_name, n_blocks, seed, threads):
    blocks = gguf_blocks.random_blocks(type_name, n_blocks, np.random.default_rng(seed))
    got = ours(type_name, blocks, threads=threads)
    want = reference(type_name, blocks)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@SLOW_OK
@given(type_name=st.sampled_from(GGUF_PY_TYPES), data=st.data())
def test_arbitrary_bytes_match_gguf_py(type_name, data):
    """Any bytes are valid blocks: NaN and infinite scales give what gguf-py gives."""
    type_size = gguf_blocks.LAYOUT[type_name][1]
    n = data.draw(st.integers(1, 8))
    blocks = np.frombuffer(data.draw(st.binary(min_size=n * type_size, max_size=n * type_size)), dtype=np.uint8)
    got = ours(type_name, blocks)
    with np.errstate(all="ignore"):
        want = reference(type_name, blocks)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@SLOW_OK
@given(type_name=st.sampled_from(list(gguf_blocks.LAYOUT)), n_blocks=st.integers(1, 24),
       seed=st.integers(0, 2**32 - 1), out=st.sampled_from(["F16", "BF16"]))
def test_f16_and_bf16_outputs_are_torchs_rounding_of_the_float32_values(type_name, n_blocks, seed, out):
    blocks = gguf_blocks.random_blocks(type_name, n_blocks, np.random.default_rng(seed))
    f32 = torch.from_numpy(ours(type_name, blocks).copy())
    want = f32.to(torch.float16 if out == "F16" else torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ours(type_name, blocks, out), want)


def test_rounding_of_special_values_is_torchs():
    f32 = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e9, np.inf, -np.inf,
                    2.0**-14, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 2.0**-26, 3 * 2.0**-24,
                    1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 3.4028235e38, -3.4028235e38,
                    1e-40, -1e-45, 0.1, -2.7182817, 3.1415927], dtype=np.float32)
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, size=4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f32 = np.concatenate([f32, bits[np.isfinite(bits)]])
    t = torch.from_numpy(f32.copy())
    for out, dt in (("F16", torch.float16), ("BF16", torch.bfloat16)):
        want = t.to(dt).view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(ours("F32", f32, out), want, err_msg=out)
    # NaN stays NaN (torch's bits for NaN vary by its code path: only NaN-ness is promised).
    nan = np.frombuffer(ours("F32", np.array([np.nan, -np.nan], dtype=np.float32), "F16"), dtype=np.float16)
    assert np.isnan(nan).all()
    assert ours("F32", np.array([np.nan], dtype=np.float32), "BF16")[0] == 0x7FC0


def _corpus_tensors():
    path = CORPUS / "expected.jsonl"
    if not path.exists():
        pytest.skip(f"no {path}")
    for line in path.read_text().splitlines():
        case = json.loads(line)
        if not case["file"].startswith("type_"):
            continue
        data = (CORPUS / case["file"]).read_bytes()
        for t in case["tensors"]:
            start = case["data_offset"] + t["offset"]
            yield case["file"], t, data[start:start + t["nbytes"]]


def test_the_corpus_float32_hashes_are_ggmls():
    checked = []
    for file, t, raw in _corpus_tensors():
        if t["dequant_f32_sha256"] is None:
            assert _ringsafe.can_dequantize(t["type"]) == (t["type"] == "F32"), file
            continue
        assert hashlib.sha256(_ringsafe.dequantize(t["type"], raw)).hexdigest() == t["dequant_f32_sha256"], file
        checked.append(t["type"])
    assert {"Q8_K", "Q1_0", "Q2_0", "MXFP4", "NVFP4", "IQ1_M", "TQ1_0"} <= set(checked)
    assert len(checked) == 28


def test_can_dequantize():
    for name in gguf_blocks.LAYOUT:
        assert _ringsafe.can_dequantize(name), name
    for name in ("Q8_1", "I8", "I16", "I32", "I64", "F64", "Q4_2", "", "q4_k"):
        assert not _ringsafe.can_dequantize(name), name


def test_errors_name_the_problem_and_leave_the_destination_alone():
    q8 = gguf_blocks.random_blocks("Q8_0", 4, np.random.default_rng(0))  # 128 elements
    cases = [
        (("Q4_2", q8), "InvalidArgument", "unknown ggml type 'Q4_2'"),
        (("Q8_1", q8[:36]), "InvalidArgument", "(Q8_1): ringsafe cannot dequantize"),
        (("F64", q8[:64]), "InvalidArgument", "(F64)"),
        (("Q8_0", q8, "I32"), "InvalidArgument", "out_dtype must be 'F32', 'F16' or 'BF16', got 'I32'"),
        (("Q8_0", q8[:35]), "InvalidArgument", "35 bytes are not whole blocks of 34 bytes"),
    ]
    for args, kind, text in cases:
        with pytest.raises(_ringsafe.SafetensorError) as e:
            _ringsafe.dequantize(*args)
        assert e.value.kind == kind and text in str(e.value), (args[0], str(e.value))

    dst = bytearray(b"\x5a" * 511)
    with pytest.raises(_ringsafe.SafetensorError) as e:
        _ringsafe.dequantize("Q8_0", q8, "F32", out=dst)
    assert e.value.kind == "BufferTooSmall" and "511" in str(e.value) and "512" in str(e.value)
    assert dst == bytearray(b"\x5a" * 511)
    with pytest.raises(TypeError):
        _ringsafe.dequantize("Q8_0", q8, "F32", out=bytes(512))  # not writable
    with pytest.raises(TypeError):
        _ringsafe.dequantize("Q8_0", q8[::2], "F32")  # not contiguous
    with pytest.raises((TypeError, ValueError)):
        _ringsafe.dequantize("Q8_0", q8, "F32", threads=-1)


def test_out_buffers_of_every_kind_get_exactly_the_output():
    blocks = gguf_blocks.random_blocks("Q4_K", 3, np.random.default_rng(1))
    want = _ringsafe.dequantize("Q4_K", blocks, "BF16")
    assert len(want) == 3 * 256 * 2
    ba = bytearray(b"\xee" * (len(want) + 7))
    assert _ringsafe.dequantize("Q4_K", blocks, "BF16", out=memoryview(ba)[3:]) == len(want)
    assert bytes(ba[3:3 + len(want)]) == want and ba[:3] == b"\xee" * 3 and ba[3 + len(want):] == b"\xee" * 4
    arr = np.empty(768, dtype=np.float32)
    assert _ringsafe.dequantize("Q4_K", blocks, out=arr) == arr.nbytes
    np.testing.assert_array_equal(arr, np.frombuffer(_ringsafe.dequantize("Q4_K", blocks), dtype=np.float32))
    t = torch.empty(768, dtype=torch.bfloat16)
    _ringsafe.dequantize("Q4_K", memoryview(blocks), "BF16", out=t.view(torch.int16).numpy())  # torch's memory
    assert t.view(torch.int16).numpy().tobytes() == want
    assert _ringsafe.dequantize("Q4_K", b"", "F32") == b""


def test_ctrl_c_stops_a_long_dequantization_and_the_process_goes_on():
    """SIGINT 0.05 s into a dequantization of 1 Gi elements to BF16 (~0.6 s on this
    machine: to F32, 0.1 s in, a quiet machine had finished first): KeyboardInterrupt,
    the output's last piece never written (seen in the bytes, not in timings), and
    the next call works."""
    code = textwrap.dedent("""
        import os, signal, sys, threading, json
        import numpy as np
        from ringsafe import _ringsafe
        n = 4096 * 1024  # Q4_K blocks: 1 Gi elements, 2 GiB of bfloat16
        blocks = np.zeros(n * 144, dtype=np.uint8)
        out = np.full(n * 256, 0x7777, dtype=np.uint16)
        threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            _ringsafe.dequantize("Q4_K", blocks, "BF16", out=out)
            outcome = "completed"
        except KeyboardInterrupt:
            outcome = "interrupted"
        tail_untouched = bool((out[-4096:] == 0x7777).all())
        after = _ringsafe.dequantize("Q8_0", bytes(34), "F32")
        print("RESULT " + json.dumps({"outcome": outcome, "tail_untouched": tail_untouched, "after": len(after)}))
    """)
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stdout + p.stderr
    r = json.loads(line[0][len("RESULT "):])
    assert r == {"outcome": "interrupted", "tail_untouched": True, "after": 128}

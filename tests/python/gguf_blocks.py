"""Random blocks of ggml's block types whose values are all finite, for the
dequantizer's tests (test_dequantize.py) and bench/bench_dequant.py.

Every byte is random except each block's scale fields, which are set as the
GGUF corpus (../shared/conformance-gguf/README.md, "Tensor data of the type_
files") sets them: fp16 scales (d, m, dmin, s) uniform in +-[0.01, 1]; Q8_K's
float32 d in [0.001, 0.05]; MXFP4's E8M0 exponent in [120, 130]; NVFP4's four
UE4M3 scales in [0x30, 0x40]; IQ1_M's fp16 scale, spread over the top nibbles
of its four 16-bit scale words, likewise moderate. Plain float types get
values in [-2, 2].
"""
import numpy as np

# Bytes per block and elements per block (ggml's table; the corpus README).
LAYOUT = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2),
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
    "Q8_K": (256, 292), "IQ2_XXS": (256, 66), "IQ2_XS": (256, 74), "IQ3_XXS": (256, 98),
    "IQ1_S": (256, 50), "IQ4_NL": (32, 18), "IQ3_S": (256, 110), "IQ2_S": (256, 82),
    "IQ4_XS": (256, 136), "IQ1_M": (256, 56), "TQ1_0": (256, 54), "TQ2_0": (256, 66),
    "MXFP4": (32, 17), "NVFP4": (64, 36), "Q1_0": (128, 18), "Q2_0": (64, 18),
}

# Byte offsets of each block's fp16 scale fields.
FP16_SCALES = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ3_XXS": [0], "IQ1_S": [0], "IQ4_NL": [0],
    "IQ3_S": [0], "IQ2_S": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64],
    "Q1_0": [0], "Q2_0": [0],
}

BLOCK_TYPES = [t for t, (bs, _) in LAYOUT.items() if bs > 1]


def _fp16_scales(rng, n):
    mag = rng.uniform(0.01, 1.0, size=n)
    return (mag * rng.choice([-1.0, 1.0], size=n)).astype(np.float16).view(np.uint8).reshape(n, 2)


def set_finite_scales(type_name, blocks, rng):
    """Overwrites the scale fields of `blocks` (uint8, shape (n, bytes per block)) in place."""
    n = blocks.shape[0]
    for off in FP16_SCALES.get(type_name, []):
        blocks[:, off:off + 2] = _fp16_scales(rng, n)
    if type_name == "Q8_K":
        blocks[:, 0:4] = rng.uniform(0.001, 0.05, size=n).astype("<f4").view(np.uint8).reshape(n, 4)
    elif type_name == "MXFP4":
        blocks[:, 0] = rng.integers(120, 131, size=n, dtype=np.uint8)
    elif type_name == "NVFP4":
        blocks[:, 0:4] = rng.integers(0x30, 0x41, size=(n, 4), dtype=np.uint8)
    elif type_name == "IQ1_M":
        d = _fp16_scales(rng, n).view("<u2").reshape(n).astype(np.uint16)
        words = blocks[:, 48:56].copy().view("<u2").reshape(n, 4) & np.uint16(0x0FFF)
        for j in range(4):  # nibble j of d in the top nibble of word j
            words[:, j] |= ((d >> np.uint16(4 * j)) & np.uint16(0xF)) << np.uint16(12)
        blocks[:, 48:56] = words.view(np.uint8).reshape(n, 8)
    return blocks


def random_blocks(type_name, n_blocks, rng):
    """n_blocks random blocks of `type_name` (uint8, flat) with finite values."""
    block_size, type_size = LAYOUT[type_name]
    if block_size == 1:
        values = rng.uniform(-2.0, 2.0, size=n_blocks)
        dt = {"F32": "<f4", "F16": "<f2"}.get(type_name)
        if dt is not None:
            return values.astype(dt).view(np.uint8)
        return (values.astype("<f4").view("<u4") >> 16).astype("<u2").view(np.uint8)  # BF16, truncated
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    return set_finite_scales(type_name, blocks, rng).reshape(-1)


def add_llama_metadata(w, *, hidden, ffn, layers, heads, kv_heads, vocab, context=2048):
    """llama.cpp's config keys of a llama and a tokenizer of ``vocab`` made-up
    tokens, written to gguf-py's GGUFWriter ``w`` (test_transformers_gguf.py,
    bench/bench_gguf.py)."""
    w.add_context_length(context)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>" for i in range(vocab)])
    w.add_token_scores([float(-i) for i in range(vocab)])
    w.add_token_types([1] * vocab)

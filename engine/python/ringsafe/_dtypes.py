"""How safetensors dtypes map to torch and NumPy types (as the reference maps
them on torch 2.13), and back for writing; the errors for a dtype or shape a
framework cannot hold."""

from __future__ import annotations

from typing import Any

from ._errors import error

# Bits per element of each safetensors dtype.
BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

# torch attribute names; a torch without one of them cannot hold that dtype.
TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "C64": "complex64",
    "F64": "float64", "I64": "int64", "U64": "uint64", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn_x2",
}

NUMPY_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
    "I32": "int32", "U32": "uint32", "F32": "float32", "C64": "complex64", "F64": "float64",
    "I64": "int64", "U64": "uint64",
}


def unsupported(dtype, framework, name):
    return error("InvalidArgument", f"tensor '{name}': dtype {dtype} has no {framework} type")


_MAX_DIM = (1 << 63) - 1


def check_dims(shape, framework, name):
    """Frameworks index with signed 64-bit integers: a larger dimension (legal in
    a zero-size tensor's header) is refused by name rather than by a TypeError."""
    if any(d > _MAX_DIM for d in shape):
        raise error("InvalidArgument", f"tensor '{name}': shape {list(shape)} has a dimension above 2^63 - 1, "
                                       f"which {framework} cannot represent")


# What dequantized values may be: their names, with torch's and NumPy's spellings.
DEQUANTIZED_NAMES = {"F32": "F32", "float32": "F32", "F16": "F16", "float16": "F16", "half": "F16",
                     "BF16": "BF16", "bfloat16": "BF16"}


def dequantized_code(dtype: Any) -> str | None:
    """F32, F16 or BF16 for a dtype= (a name, a torch dtype, a NumPy dtype), None for None."""
    if dtype is None:
        return None
    name = dtype if isinstance(dtype, str) else str(dtype).replace("torch.", "")
    if name not in DEQUANTIZED_NAMES:
        try:
            import numpy as np
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in DEQUANTIZED_NAMES:
        raise error("InvalidArgument", f"dtype {dtype!r}: GGUF tensors load as float32, float16 or bfloat16")
    return DEQUANTIZED_NAMES[name]

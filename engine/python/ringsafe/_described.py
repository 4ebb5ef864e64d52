"""DescribedTensor, one tensor as the engine's whole-dict writers take it:
_ringsafe.save_declared, serialize and gguf_save read its fields by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DescribedTensor:
    """A tensor handed to the engine's writers: ``name``, ``dtype`` (the
    safetensors code, or for gguf_save a GGUF type name), ``shape``,
    ``nbytes`` bytes at ``address``, and ``owner``, which keeps those bytes
    alive while the record lives (None where the caller keeps them alive)."""

    name: str
    dtype: str
    shape: list[int]
    address: int
    nbytes: int
    owner: Any = None

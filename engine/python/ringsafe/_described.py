"""The records the engine's writers read by name (attributes, not positions):
DescribedTensor, one tensor as the whole-dict writers take it
(_ringsafe.save_declared, serialize, gguf_save), and GGUFEntry, one GGUF
metadata entry (gguf_save, GGUFStreamWriter); and CallerTensor, a caller's
tensor as an adapter describes it (here, not in _frameworks, so that the
adapters import no module that imports them)."""

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


@dataclass(frozen=True, slots=True)
class GGUFEntry:
    """One GGUF metadata entry as the engine takes it: ``key``, ``type`` and
    ``element_type`` (an ARRAY's, else None; named as gguf-py's GGUFValueType),
    and ``values`` (one for a scalar, an ARRAY's elements)."""

    key: str
    type: str
    element_type: str | None
    values: list[Any]


@dataclass(frozen=True)
class CallerTensor:
    """A caller's tensor as the engine takes it (what adapter.describe()
    returns): ``dtype`` (the safetensors code), ``shape`` (safetensors', an F4
    tensor's last dimension counted in values), ``nbytes`` bytes at
    ``address``, and ``owner``, which keeps those bytes alive (the tensor, or a
    contiguous or converted copy of it when writing)."""

    dtype: str
    shape: list[int]
    address: int
    nbytes: int
    owner: Any

"""The records the engine reads by name (attributes, not positions):
DescribedTensor, one tensor as the whole-dict writers take it
(_ringsafe.save_declared, serialize, gguf_save), and GGUFEntry, one GGUF
metadata entry (gguf_save, GGUFStreamWriter); the elements of the reads'
sequence arguments: FileRange (MappedFile.populate), RangeCopy
(MappedFile.copy_to), MemorySpan (the destinations of plan_tensors_at and
read_to_device_at), TensorRequest (Reader.plan_requests) and AddressedRequest
(plan_requests_at); and CallerTensor, a caller's tensor as an adapter
describes it, and FreshTensor, the new memory an adapter's fresh() gives one
tensor (here, not in _frameworks, so that the adapters import no module that
imports them).

The package passes these records everywhere. The bindings also take the
tuples of the same fields in the same order, ``(offset, length)``,
``(address, size)``, ``(name, box, buffer)``, ...: the compatibility of the
public edge for code written before the records (arguments.cpp's
record_fields reads either). A box stays a list of (start, stop) pairs, one
per leading dimension, as a slice does: a value, not a record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._typing import Box, Buffer


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


@dataclass(frozen=True, slots=True)
class FileRange:
    """``length`` bytes of a file at ``offset`` (what MappedFile.populate makes resident)."""

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class RangeCopy:
    """``length`` bytes of a file at ``offset``, copied into the start of ``buffer`` (MappedFile.copy_to)."""

    offset: int
    length: int
    buffer: Buffer


@dataclass(frozen=True, slots=True)
class MemorySpan:
    """``size`` bytes of memory at ``address``: a destination written unchecked (ringsafe.lowlevel)."""

    address: int
    size: int


@dataclass(frozen=True, slots=True)
class TensorRequest:
    """The box [(start, stop), ...] of tensor ``name`` read into ``buffer`` (Reader.plan_requests)."""

    name: str
    box: Box
    buffer: Buffer


@dataclass(frozen=True, slots=True)
class AddressedRequest:
    """The box [(start, stop), ...] of tensor ``name`` into ``size`` bytes at ``address`` (plan_requests_at)."""

    name: str
    box: Box
    address: int
    size: int


@dataclass(frozen=True, slots=True)
class FreshTensor:
    """New memory for one tensor (adapter.fresh()): the framework's ``tensor``, its bytes at ``address``."""

    tensor: Any
    address: int

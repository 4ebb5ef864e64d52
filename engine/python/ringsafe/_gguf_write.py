"""Writing GGUF files: ``save_file`` and the streaming ``Writer`` (re-exported by ringsafe.gguf).

GGUF types come from the Python values (gguf-py's rules: str -> STRING,
bool -> BOOL, int -> INT32, or INT64 when it does not fit, float -> FLOAT32,
a list -> an ARRAY of its elements' type); ``(type, value)`` chooses the type
(``("UINT64", 7)``, ``("FLOAT64", 0.1)``, ``("ARRAY", "UINT32", [1, 2])``),
a type given by its name as gguf-py's GGUFValueType spells it, or the enum.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from ._described import DescribedTensor, GGUFEntry
from ._frameworks import adapter_of
from ._paths import spec_of
from ._ringsafe import GGUFStreamWriter, gguf_save
from ._write import OnePassWriter

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._typing import Buffer, StrPath

    MetadataValue = Union[str, bool, int, float, list[Any], tuple[Any, ...]]

__all__ = ["Writer", "save_file"]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _type_name(t: Any) -> str:
    """A value type given as its name ("UINT32") or as gguf-py's GGUFValueType."""
    return t if isinstance(t, str) else str(getattr(t, "name", t))


def _auto_type(key: str, v: Any) -> str:
    if isinstance(v, str):
        return "STRING"
    if isinstance(v, bool):
        return "BOOL"
    if isinstance(v, int):
        return "INT32" if INT32_MIN <= v <= INT32_MAX else ("INT64" if v < 2**63 else "UINT64")
    if isinstance(v, float):
        return "FLOAT32"
    raise TypeError(f"metadata key {key!r}: no GGUF type for a {type(v).__name__}; give (type, value)")


def _entry(key: str, value: Any) -> GGUFEntry:
    """The GGUFEntry of one metadata item."""
    if not isinstance(key, str):
        raise TypeError(f"metadata keys must be str, got {key!r}")
    if isinstance(value, tuple):
        if len(value) == 3 and _type_name(value[0]) == "ARRAY":
            return GGUFEntry(key, "ARRAY", _type_name(value[1]), list(value[2]))
        if len(value) != 2:
            raise TypeError(f"metadata key {key!r}: a typed value is (type, value) or ('ARRAY', element_type, values)")
        t = _type_name(value[0])
        if t == "ARRAY":
            values = list(value[1])
            element = _auto_type(key, values[0]) if values else "INT32"
            return GGUFEntry(key, "ARRAY", element, values)
        return GGUFEntry(key, t, None, [value[1]])
    if isinstance(value, list):
        element = "STRING"
        if value:
            kinds = {_auto_type(key, v) for v in value}
            ints = {"INT32", "INT64", "UINT64"}
            element = kinds.pop() if len(kinds) == 1 else ("INT64" if kinds <= ints - {"UINT64"} else "")
            if not element:
                raise TypeError(f"metadata key {key!r}: an array's elements must be of one type; give ('ARRAY', type, values)")
        return GGUFEntry(key, "ARRAY", element, value)
    return GGUFEntry(key, _auto_type(key, value), None, [value])


def save_file(tensors: Mapping[str, Any], path: StrPath, metadata: Mapping[str, MetadataValue] | None = None, *,
              alignment: int = 32, sync: bool = True) -> None:
    """Writes ``tensors`` (torch tensors or numpy arrays of float32, float16,
    bfloat16, float64, int8..int64) and ``metadata`` as a GGUF file at
    ``path``, in dict order, the header exact; each shape is reversed into
    ggml's ``ne``. The file appears whole at ``path`` or not at all; what GGUF
    cannot hold (another dtype, more than 4 dimensions, a name over 63 bytes)
    raises SafetensorError naming the tensor before anything is written."""
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of str to tensors, got {type(tensors).__name__}")
    described: list[DescribedTensor] = []
    for name, t in tensors.items():
        adapter = adapter_of(t)
        if adapter is None:
            raise TypeError(f"tensor {name!r}: expected a torch.Tensor or numpy.ndarray, got {type(t).__name__}")
        adapter.check_type(t, name)
        d = adapter.describe(t, name)
        described.append(DescribedTensor(name, d.dtype, list(d.shape), d.address, d.nbytes, d.owner))
    gguf_save(spec_of(path), described, _entries(metadata), alignment, sync)
    del described  # its owners kept the bytes alive until the write returned


def _entries(metadata: Mapping[str, MetadataValue] | None) -> list[GGUFEntry]:
    return [_entry(k, v) for k, v in (metadata or {}).items()]


class Writer(OnePassWriter):
    """Streams a GGUF file: ``with Writer(path, metadata) as w: w.write(name, tensor)``.
    Header space is reserved up front (``reserve_bytes``, else from
    ``expected_tensors``) and filled in at the end, the slack held by a
    ``ringsafe.padding`` entry; a header that outgrows it moves the data once.
    The file appears at ``path`` only when the block ends without an exception.
    Each tensor is copied out before write() returns (bounded staging memory)."""

    def __init__(self, path: StrPath, metadata: Mapping[str, MetadataValue] | None = None, *, alignment: int = 32,
                 sync: bool = True, expected_tensors: int | None = None, reserve_bytes: int | None = None,
                 direct: bool = True) -> None:
        self.path: str = spec_of(path)
        self._w = GGUFStreamWriter(self.path, _entries(metadata), alignment, sync, reserve_bytes or 0,
                                   expected_tensors or 0, direct)
        self.stats: dict[str, Any] | None = None

    def write_bytes(self, name: str, type_name: str, shape: Sequence[int], data: Buffer) -> None:
        """Adds a tensor from raw little-endian bytes: ``type_name`` a GGUF type
        ("Q4_K", "BF16", ...) or a safetensors dtype, ``shape`` in elements,
        PyTorch order (a block type's blocks pass through as they are)."""
        self._add_bytes(name, type_name, shape, data)

    def finish(self, metadata: Mapping[str, MetadataValue] | None = None) -> dict[str, Any]:
        """Writes the header (with ``metadata`` in place of the constructor's when
        given), syncs and publishes; returns the writer's stats."""
        self.stats = self._w.finish(None if metadata is None else _entries(metadata))
        return self.stats

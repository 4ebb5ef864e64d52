"""GGUF files (llama.cpp's, ollama's format) through ringsafe's engine:

    import ringsafe.gguf
    with ringsafe.gguf.open("model-Q4_K_M.gguf") as f:
        print(f.metadata["general.architecture"], [t.type for t in f.tensors][:3])
        w = f.get_tensor("blk.0.attn_q.weight")               # dequantized to float32
    state = ringsafe.gguf.load_file("hf://ORG/NAME/model-Q8_0.gguf", dtype="BF16")

Every source the engine reads (paths, a split set by any of its parts,
http(s)://, s3://, gs://, az://, hf://) through one Reader and its options.
Whole tensors only: quantized ones as float32 (or ``dtype``: F16, BF16), or
with ``raw=True`` as their blocks (uint8); plain types (F32, F16, BF16, F64,
I8-I64) as their own dtype. Dequantization runs in C++ on the engine's
threads with the GIL released, each tensor as soon as its bytes have landed
while later reads are still in flight; raw blocks are staged in batches of at
most 256 MiB in two buffers used in turn, so memory beyond the returned
tensors is at most 2 x max(256 MiB, the largest tensor's blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from . import _ringsafe
from ._convert import ConvertResult, convert  # noqa: F401  (one implementation: ringsafe.convert)
from ._dtypes import NUMPY_NAMES, TORCH_NAMES, dequantized_code, unsupported
from ._errors import error
from ._gguf_write import Writer, save_file  # noqa: F401  (the writing side: _gguf_write.py)
from ._selection import resolve

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._typing import ReaderOptions, StrPath

__all__ = ["ConvertResult", "GGUFFile", "GGUFTensor", "Writer", "convert", "load_file", "open", "save_file"]

# Tensor types held as they are stored (ggml's plain types, named as safetensors dtypes are).
PLAIN_TYPES = ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")
Framework = Literal["pt", "torch", "pytorch", "np", "numpy"]
# select=: None (all), a name or glob, names and globs, or a predicate on a tensor's record.
GGUFSelect = str | Iterable[str] | Callable[["GGUFTensor"], bool] | None


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file, in file order: ``type`` named as gguf-py's
    GGMLQuantizationType ("Q4_K", "F16", ...), ``shape`` in PyTorch's order and
    ``ne`` in ggml's (the same reversed), ``offset`` relative to its file's data
    section, ``nbytes`` its stored size, ``shard`` its part of a split set (0-based)."""

    name: str
    type: str
    shape: tuple[int, ...]
    ne: tuple[int, ...]
    offset: int
    nbytes: int
    shard: int = 0


def _framework(framework: str) -> str:
    if framework in ("pt", "torch", "pytorch"):
        return "pt"
    if framework in ("np", "numpy"):
        return "np"
    raise error("InvalidArgument", f"framework {framework} is invalid (ringsafe supports pt, torch, pytorch, np, numpy)")


def _raw_shape(t: GGUFTensor) -> tuple[int, ...]:
    """The blocks' shape as gguf-py gives it: rows kept, the last dimension in bytes."""
    if not t.shape:
        return (t.nbytes,)
    rows = 1
    for d in t.shape[:-1]:
        rows *= d
    return t.shape[:-1] + ((t.nbytes // rows) if rows else 0,)


class _Target:
    """How one tensor is read: the engine's out dtype (None: as stored), the
    buffer's bytes, and the dtype and shape it is handed out as; ``cast`` is a
    dtype applied afterwards (an integer or F64 tensor given a dtype=)."""

    def __init__(self, t: GGUFTensor, out: str | None, raw: bool, np_only: bool) -> None:
        self.t = t
        self.cast = None
        if raw:
            self.out, self.dtype, self.shape, self.nbytes = None, "U8", _raw_shape(t), t.nbytes
            return
        if t.type in PLAIN_TYPES and (out is None or out == t.type):
            self.out, self.dtype, self.shape, self.nbytes = None, t.type, t.shape, t.nbytes
            return
        if t.type in PLAIN_TYPES and t.type not in ("F32", "F16", "BF16"):
            self.out, self.dtype, self.shape, self.nbytes = None, t.type, t.shape, t.nbytes
            self.cast = out
            return
        self.out = out or "F32"
        if not _ringsafe.can_dequantize(t.type):
            raise error("InvalidArgument", f"tensor '{t.name}' ({t.type}): ringsafe cannot dequantize this type; "
                                           "raw=True gives its blocks")
        self.dtype, self.shape = self.out, t.shape
        elements = 1
        for d in t.shape:
            elements *= d
        self.nbytes = elements * (4 if self.out == "F32" else 2)
        if np_only and self.out == "BF16":
            raise unsupported("BF16", "numpy", t.name)


def _new(framework: str, target: _Target) -> tuple[Any, Any]:
    """(the tensor handed out, the writable buffer the engine fills)."""
    if framework == "np":
        import numpy as np
        if target.dtype not in NUMPY_NAMES:
            raise unsupported(target.dtype, "numpy", target.t.name)
        flat = np.empty(target.nbytes, dtype=np.uint8)
        return flat.view(NUMPY_NAMES[target.dtype]).reshape(target.shape), flat
    import torch
    flat_t = torch.empty(target.nbytes, dtype=torch.uint8)
    return flat_t.view(getattr(torch, TORCH_NAMES[target.dtype])).reshape(target.shape), flat_t.numpy()


def _cast(framework: str, tensor: Any, code: str) -> Any:
    if framework == "np":
        return tensor.astype(NUMPY_NAMES[code])
    import torch
    return tensor.to(getattr(torch, TORCH_NAMES[code]))


def _read(reader: _ringsafe.Reader, tensors: list[GGUFTensor], dtype: Any, raw: bool,
          framework: str) -> dict[str, Any]:
    """{name: tensor} of whole tensors, read (and dequantized) in one engine call."""
    fw = _framework(framework)
    out = dequantized_code(dtype)
    targets = [_Target(t, out, raw, fw == "np") for t in tensors]  # every check before any I/O
    made = [_new(fw, x) for x in targets]
    _ringsafe.gguf_read(reader, [x.t.name for x in targets], [buf for _, buf in made], [x.out for x in targets])
    result = {}
    for x, (tensor, _) in zip(targets, made):
        result[x.t.name] = _cast(fw, tensor, x.cast) if x.cast else tensor
    return result


class GGUFFile:
    """An open GGUF file or split set (``open()``): its header's ``version``,
    ``alignment``, ``data_offset`` (a split set's first part's), ``metadata``
    (the file's key-value entries in file order, each value as gguf-py's
    ``ReaderField.contents()`` gives it; a split set's first part's),
    ``value_types`` (key: (type, element type or None), named as gguf-py's
    GGUFValueType), and ``tensors`` (GGUFTensor records in file order, every
    part's). A context manager; ``close()`` releases the source."""

    version: int
    alignment: int
    data_offset: int
    metadata: dict[str, Any]
    value_types: dict[str, tuple[str, str | None]]
    tensors: list[GGUFTensor]

    def __init__(self, source: StrPath, **source_options: Unpack[ReaderOptions]) -> None:
        self._reader = _ringsafe.Reader(source, **source_options)
        try:
            header = _ringsafe.gguf_header(self._reader)
        except BaseException:
            self._reader.close()
            raise
        self.version, self.alignment, self.data_offset = header.version, header.alignment, header.data_offset
        self.metadata = {e.key: e.value for e in header.metadata}
        self.value_types = {e.key: (e.type, e.element_type) for e in header.metadata}
        self.tensors = [GGUFTensor(name=t.name, type=t.type, shape=tuple(t.shape), ne=tuple(reversed(t.shape)),
                                   offset=t.offset, nbytes=t.nbytes, shard=t.shard)
                        for t in _ringsafe.gguf_tensors(self._reader)]
        self._by_name = {t.name: t for t in self.tensors}

    @property
    def reader(self) -> _ringsafe.Reader:
        """The engine's Reader under this file (shards, spec, format)."""
        return self._reader

    def keys(self) -> list[str]:
        """Tensor names in file order."""
        return [t.name for t in self.tensors]

    def tensor(self, name: str) -> GGUFTensor:
        """The record of tensor ``name``; SafetensorError (TensorNotFound) naming it."""
        t = self._by_name.get(name)
        if t is None:
            raise error("TensorNotFound", f"tensor '{name}' not found in {self._reader.spec}")
        return t

    def get_tensor(self, name: str, dtype: Any = None, raw: bool = False, framework: Framework = "pt") -> Any:
        """Tensor ``name`` whole: a plain type as its own dtype; a quantized one
        dequantized to float32 or ``dtype`` (F32/F16/BF16, as a name, torch or
        NumPy dtype); ``raw=True``: its stored bytes as uint8 (rows kept, the
        last dimension in bytes). ``framework="np"`` gives a NumPy array."""
        return _read(self._reader, [self.tensor(name)], dtype, raw, framework)[name]

    def select(self, select: GGUFSelect = None) -> list[GGUFTensor]:
        """The records ``select`` chooses, in file order: None (all), a name or
        glob, names and globs (exact names must exist), or a predicate on a record."""
        if callable(select):
            return [t for t in self.tensors if select(t)]
        names = resolve(self._reader, self.keys(), select)
        return [self._by_name[n] for n in names]

    def load(self, select: GGUFSelect = None, dtype: Any = None, raw: bool = False,
             framework: Framework = "pt") -> dict[str, Any]:
        """{name: tensor} of the selected tensors in file order, as get_tensor
        gives each, read and dequantized in one parallel engine call."""
        return _read(self._reader, self.select(select), dtype, raw, framework)

    def close(self) -> None:
        """Releases the source (a running read keeps it until it ends)."""
        self._reader.close()

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(source: StrPath, **source_options: Unpack[ReaderOptions]) -> GGUFFile:  # noqa: A001 (as safe_open)
    """Opens a GGUF file, or the whole split set of any of its parts, at a path or
    URL, with Reader's keyword options (connections, token, ...); reads the header
    alone. SafetensorError with ggml's error kind (BadMagic, BadOffset, ...) for a
    file ggml refuses, InvalidArgument for a safetensors file."""
    return GGUFFile(source, **source_options)


def load_file(source: StrPath, select: GGUFSelect = None, dtype: Any = None, device: Any = "cpu",
              framework: Framework = "pt", raw: bool = False,
              **source_options: Unpack[ReaderOptions]) -> dict[str, Any]:
    """{name: tensor} of a GGUF file's (or split set's) tensors in file order:
    quantized ones dequantized to float32 or ``dtype``, plain ones as their own
    dtype (see GGUFFile.get_tensor), then moved to ``device`` (torch only)."""
    with open(source, **source_options) as f:
        out = f.load(select, dtype, raw, framework)
    if _framework(framework) == "np" or str(device) == "cpu":
        if str(device) != "cpu":
            raise error("InvalidArgument", f"device {device}: NumPy arrays live on the CPU")
        return out
    return {n: t.to(device) for n, t in out.items()}


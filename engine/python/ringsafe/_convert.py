"""Conversions between checkpoints (``ringsafe.convert``, also ``ringsafe.gguf.convert``):
the engine's read/write pipeline, ``ringsafe cp``'s, chosen by the target's
extension (.gguf: GGUF, else safetensors):

- GGUF -> safetensors: plain tensors keep their type; block types (Q4_K, Q8_0,
  ...) are dequantized to ``dtype`` (float32, exact; float16 or bfloat16 as
  gguf-py's float32 values rounded to nearest even); the GGUF metadata goes
  into ``__metadata__`` as ``"gguf.KEY"``: the value's JSON text.
- safetensors -> GGUF: dtypes GGUF has (F32, F16, BF16, F64, I8..I64), shapes
  reversed into ggml's ``ne``, ``__metadata__`` as STRING entries; names kept
  (llama.cpp's names per architecture are ``convert_hf_to_gguf.py``'s job).
- GGUF -> GGUF: blocks and metadata as they are; a split set into one file,
  or one file into a split set (``split_max_size`` / ``split_max_tensors``).
- safetensors -> safetensors: a copy of the selection, or a resharding.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _ringsafe
from ._dtypes import dequantized_code
from ._errors import error
from ._paths import spec_of
from ._progress import progress_callback

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._typing import Progress, ReaderOptions, StrPath

__all__ = ["ConvertResult", "convert"]

_SIZE = re.compile(r"(\d+)\s*([KMGTkmgt]?)(i?B)?")


@dataclass(frozen=True)
class ConvertResult:
    """What ``convert`` did: ``files`` published (shards or parts in order, then
    an index), ``tensors`` written, ``bytes`` of source tensor data, ``seconds``,
    and the pipeline's ``buffers`` allocated of ``buffer_bytes`` each, its
    ``readers`` (threads), and the seconds the writer waited for reads
    (``write_waited``) and readers for a free buffer (``read_waited``)."""

    files: tuple[str, ...]
    tensors: int
    bytes: int
    seconds: float
    buffers: int
    buffer_bytes: int
    readers: int
    write_waited: float
    read_waited: float


def _size(value: int | str | None, what: str) -> int | None:
    """An int, or a size as ``ringsafe cp`` takes it ("64M", "4G", "512KiB", "2GB": K, M, G, T are powers of 1024)."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _SIZE.fullmatch(value.strip())
        if m and not (m.group(3) == "B" and not m.group(2)):
            return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))
        raise ValueError(f"{what} {value!r}: a size is an int or a string such as '64M', '4G', '512KiB'")
    raise TypeError(f"{what} must be an int or a str such as '4G', got {type(value).__name__}")


def _dtype_code(dtype: Any) -> str:
    """F32, F16 or BF16 for a dtype= (a name, a torch or NumPy dtype)."""
    code = dequantized_code(dtype)
    if code is None:
        raise error("InvalidArgument", "dtype None: dequantized GGUF tensors become float32, float16 or bfloat16")
    return code


def convert(source: StrPath, target: StrPath, *, select: str | Iterable[str] | None = None, dtype: Any = "float32",
            max_shard_size: int | str | None = None, split_max_size: int | str | None = None,
            split_max_tensors: int | None = None, buffer_size: int | str = 64 << 20, buffers: int = 4,
            direct_write: bool = True, sync: bool = True, progress: Progress = None,
            **source_options: Unpack[ReaderOptions]) -> ConvertResult:
    """Converts the tensors ``select`` chooses (globs over names, as ``ringsafe cp
    --select``; None: all) and the metadata of ``source`` (a path or URL, a
    sharded ``*.index.json``, a GGUF file or any part of a split set) into a new
    file ``target``, by its extension (see the module's text). ``dtype``:
    what GGUF block tensors become in a safetensors target. ``max_shard_size``:
    a safetensors target as shards ``NAME-00001-of-0000N.safetensors`` with
    ``NAME.safetensors.index.json``. ``split_max_size`` / ``split_max_tensors``:
    a GGUF target as a split set ``NAME-00001-of-0000N.gguf`` (gguf-split's
    names and ``split.*`` keys). Memory stays at about ``buffers`` x
    ``buffer_size`` whatever the size of the files. ``direct_write``: O_DIRECT
    writes where the filesystem allows; ``sync``: fsync each file and its
    directory. Other keywords are Reader's options (connections, token,
    ``direct`` for O_DIRECT reads, ...). The GIL is released; Ctrl-C
    stops it (KeyboardInterrupt). What the target cannot hold raises
    SafetensorError naming the tensor before anything is written; an error or
    Ctrl-C leaves nothing at the target."""
    names = None if select is None else [select] if isinstance(select, str) else list(select)
    src, out = spec_of(source), spec_of(target)
    buffer_bytes = _size(buffer_size, "buffer_size")
    if buffer_bytes is None:
        raise TypeError("buffer_size must be an int or a str such as '64M', not None")
    with progress_callback(progress, f"converting {src}") as cb:
        got = _ringsafe.convert(src, out, select=names, dtype=_dtype_code(dtype),
                                max_shard_size=_size(max_shard_size, "max_shard_size"),
                                split_max_size=_size(split_max_size, "split_max_size"),
                                split_max_tensors=split_max_tensors, buffer_size=buffer_bytes,
                                buffers=buffers, direct_write=direct_write, sync=sync, progress=cb, **source_options)
    return ConvertResult(files=tuple(got.files), tensors=got.tensors, bytes=got.bytes, seconds=got.seconds,
                         buffers=got.buffers, buffer_bytes=got.buffer_bytes, readers=got.readers,
                         write_waited=got.write_waited, read_waited=got.read_waited)

"""transformers' own GGUF loading (modeling_gguf_pytorch_utils.load_gguf_checkpoint:
its config mapping, tensor-name mapping and per-architecture processors, the
Q/K permutation among them) run unchanged over ringsafe's reads.

The seam: load_gguf_checkpoint opens the file with ``gguf.GGUFReader(path)``
(imported from the gguf module when it is called) and turns each tensor into
float32 with ``gguf.dequantize(tensor.data, tensor.tensor_type)``. While it
runs, ``gguf.GGUFReader`` is a factory that returns ``_Reader`` to this call
(its own path, on its own thread; any other open is gguf-py's), which holds
what that code reads of gguf-py's reader, made from ringsafe's header:

- ``fields``: {key: field}, each with ``parts``, ``data`` (indices of the value's
  parts) and ``types`` (GGUFValueType ids; [ARRAY, element type] for arrays),
  which its ``_gguf_parse_value`` decodes: a number as a 1-tuple, a string as
  its UTF-8 bytes;
- ``tensors``: each with ``name``, ``tensor_type`` and ``data``. ringsafe has
  already read and dequantized every tensor (in C++, as the reads landed), so
  ``data`` is its float32 values and ``tensor_type`` F32, for which gguf-py's
  dequantize hands the array back as it is.

``gguf.get_tensor_name_map`` is memoized for the call (a pure function of the
architecture and layer count that transformers' name mapping asks for once per
submodule).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from . import gguf as _gguf

# gguf-py's GGUFValueType ids, by name.
_VALUE_TYPES = {"UINT8": 0, "INT8": 1, "UINT16": 2, "INT16": 3, "UINT32": 4, "INT32": 5, "FLOAT32": 6, "BOOL": 7,
                "STRING": 8, "ARRAY": 9, "UINT64": 10, "INT64": 11, "FLOAT64": 12}
# Plain types gguf-py's dequantize does not convert (kept as they are).
_KEPT = ("F64", "I8", "I16", "I32", "I64")

_patch_lock = threading.Lock()


def _part(value: Any, type_name: str) -> Any:
    if type_name == "STRING":
        return value.encode("utf-8", "surrogateescape")
    return (value,)


class _Field:
    """One metadata entry as gguf-py's ReaderField holds what transformers reads of it."""

    def __init__(self, value: Any, type_name: str, element_type: str | None):
        if type_name == "ARRAY":
            assert element_type is not None
            self.types = [_VALUE_TYPES["ARRAY"], _VALUE_TYPES[element_type]]
            self.parts = [_part(v, element_type) for v in value]
        else:
            self.types = [_VALUE_TYPES[type_name]]
            self.parts = [_part(value, type_name)]
        self.data = list(range(len(self.parts)))


class _Tensor:
    def __init__(self, name: str, data: Any):
        import gguf
        self.name = name
        self.data = data
        self.tensor_type = gguf.GGMLQuantizationType.F32 if data.dtype.name == "float32" else None


class _Reader:
    """What load_gguf_checkpoint reads of a GGUFReader, from an open ringsafe.gguf file."""

    def __init__(self, f: _gguf.GGUFFile, tensors: dict[str, Any] | None):
        self.fields = {k: _Field(v, *f.value_types[k]) for k, v in f.metadata.items()}
        if tensors is None:  # the config alone: names only
            import numpy as np
            empty = np.empty(0, dtype=np.float32)
            self.tensors = [_Tensor(t.name, empty) for t in f.tensors]
        else:
            self.tensors = [_Tensor(n, t) for n, t in tensors.items()]


def load_gguf_checkpoint(f: _gguf.GGUFFile, return_tensors: bool = False, model_to_load: Any = None,
                         torch_dtype: Any = None) -> dict[str, Any]:
    """transformers' load_gguf_checkpoint over ``f``: its config (and with
    return_tensors, its state dict for ``model_to_load``), every tensor read and
    dequantized by ringsafe first."""
    import gguf
    from transformers import modeling_gguf_pytorch_utils as hf

    tensors = None
    if return_tensors:
        plain = [t.name for t in f.tensors if t.type in _KEPT]
        tensors = f.load(select=lambda t: t.type not in _KEPT, dtype="F32", framework="np")
        tensors.update(f.load(select=plain, framework="np"))
        tensors = {t.name: tensors[t.name] for t in f.tensors}
    reader = _Reader(f, tensors)
    token, caller = f.reader.spec, threading.get_ident()
    with _patch_lock:
        original, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

        def opened(path: Any, *args: Any, **kw: Any) -> Any:
            # This call's own open; any other thread's GGUFReader is gguf-py's.
            if path == token and threading.get_ident() == caller:
                return reader
            return original(path, *args, **kw)

        gguf.GGUFReader = opened  # type: ignore[misc, assignment]  # the seam: a factory in its place
        # get_gguf_hf_weights_map asks for the same (arch, layers) map once per
        # submodule (200 times for a 16-layer llama, 16 ms each): made once.
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
        try:
            return hf.load_gguf_checkpoint(token, return_tensors=return_tensors, model_to_load=model_to_load,
                                           torch_dtype=torch_dtype)
        finally:
            gguf.GGUFReader = original  # type: ignore[misc]
            gguf.get_tensor_name_map = name_map


def from_pretrained(spec: str, model_class: Any, model_class_of: Any, options: dict[str, Any],
                    kwargs: dict[str, Any]) -> Any:
    """The model of the GGUF file at ``spec`` as transformers'
    ``from_pretrained(..., gguf_file=)`` builds it: config from the file's
    metadata, weights dequantized by ringsafe, then transformers' mapping."""
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with _gguf.open(spec, **options) as f:
        config_dict = load_gguf_checkpoint(f)["config"]
        config = CONFIG_MAPPING[config_dict["model_type"]].from_dict(config_dict)
        cls = model_class_of(config, model_class)
        with torch.device("meta"):
            skeleton = cls(config)  # for the tensor-name mapping only: no memory
        dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
        dtype = dtype if isinstance(dtype, torch.dtype) else torch.get_default_dtype()
        state_dict = load_gguf_checkpoint(f, return_tensors=True, model_to_load=skeleton, torch_dtype=dtype)["tensors"]
    del skeleton
    model = cls.from_pretrained(None, config=config, state_dict=state_dict, **kwargs)
    del state_dict
    return model

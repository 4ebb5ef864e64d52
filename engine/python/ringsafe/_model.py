"""load_model / save_model for torch modules: parameters and buffers filled in
place with one parallel read, and tensors that share memory handled as the
reference handles them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import _device, _write
from ._described import MemorySpan
from ._progress import progress_callback
from ._ringsafe import plan_tensors_at
from ._shared import _remove_duplicate_names
from ._engine_source import EngineSource
from ._mapped import copy_into, mapped_views
from . import _caller_memory
from ._source import check_backend, open_reader
from ._torch_adapter import ADAPTER

if TYPE_CHECKING:
    from collections.abc import Mapping


def _error_text(model, missing, unexpected):
    text = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
    if missing:
        text += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
    if unexpected:
        text += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
    return text


@dataclass(frozen=True)
class KeyMatch:
    """A model's state against a checkpoint's tensors, as load_state_dict
    reports them: ``missing`` (in the state, not in the file), ``unexpected``
    (in the file, not loaded) and ``dropped`` (names sharing memory with
    another, left out of the state's targets)."""

    missing: set[str]
    unexpected: list[str]
    dropped: set[str]


def match_keys(model: torch.nn.Module, state: dict[str, torch.Tensor], in_file: Mapping[str, Any],
               strict: bool) -> KeyMatch:
    """The KeyMatch of a model's ``state`` against the checkpoint's tensors
    ``in_file`` (a dict by name, in data order): names sharing memory with
    another are dropped from ``state`` (the checkpoint's name kept), a dropped
    name the file holds is unexpected. strict=True raises RuntimeError on any."""
    aliases = _remove_duplicate_names(state, preferred_names=in_file.keys())
    dropped = {n for names in aliases.values() for n in names}
    missing = {k for k in state if k not in in_file}
    unexpected = [k for k in in_file if k not in state]
    for n in dropped:
        if n in missing:
            missing.discard(n)
        else:
            unexpected.append(n)
    if strict and (missing or unexpected):
        raise RuntimeError(_error_text(model, missing, unexpected))
    return KeyMatch(missing, unexpected, dropped)


def size_mismatch(model, name, file_shape, param_shape, *, part=""):
    """The RuntimeError load_state_dict raises for a parameter of another shape
    (``part``: what of the checkpoint's tensor this is, e.g. " (this rank's part)")."""
    return RuntimeError(_error_text(model, (), ()) + f"\n    size mismatch for {name}: copying a param with "
                        f"shape {torch.Size(file_shape)} from checkpoint{part}, the shape in current model is "
                        f"{param_shape}.")


def load_model(model, filename, *, strict, device, progress, backend, options):
    check_backend(backend)  # either way the bytes land in the parameters' own memory
    device = ADAPTER.check_device(device)
    reader = open_reader(filename, options)
    try:
        infos = {t.name: t for t in reader.tensors()}
        state = model.state_dict()
        keys = match_keys(model, state, infos, strict)
        targets = [k for k in infos if k in state and k not in keys.dropped]
        direct, on_device, staged = [], [], []
        for k in targets:
            p, info = state[k], infos[k]
            file_shape = ADAPTER.shape_of(info.dtype, info.shape, k)
            if list(p.shape) != file_shape:
                raise size_mismatch(model, k, file_shape, p.shape)
            same_dtype = ADAPTER.dtype_of(p) == info.dtype
            if same_dtype and _device.in_place(p, device):
                on_device.append(k)  # straight into the parameter's device memory
            elif same_dtype and p.device.type == "cpu" and p.is_contiguous():
                direct.append(k)
            else:
                staged.append(k)
        maps: Any = None
        views: Any = None
        if not on_device:  # host memory only: copied from the page cache when cached, O_DIRECT when cold
            # (device staging stays buffered); backend="pread" never maps the file.
            viewer = _caller_memory.byte_views(ADAPTER, [state[k] for k in direct]) if backend == "mmap" else None
            how = _caller_memory.mapped_or_read(reader, filename, options=options,
                                                infos=[infos[k] for k in targets], byte_views=viewer)
            maps, views, reader = how.maps, how.views, how.reader
        if on_device:
            by_device: dict[torch.device, dict[str, torch.Tensor]] = {}
            for k in on_device:
                by_device.setdefault(state[k].device, {})[k] = state[k]
            for where, group in by_device.items():
                _device.read_into(reader, device if where.type == "cpu" else where, group, progress=progress,
                                  description=f"loading {filename}")
        with progress_callback(progress, f"loading {filename}") as cb:
            if direct:
                dsts = [MemorySpan(state[k].data_ptr(), infos[k].nbytes) for k in direct]
                plan = plan_tensors_at(reader, direct, dsts, [state[k] for k in direct])  # checks them either way
                if maps is not None:
                    copy_into(maps, reader.shards(), [(infos[k], v) for k, v in zip(direct, views)],
                              threads=options.get("threads"), progress=cb)
                else:
                    reader.execute(plan, cb)
            if staged:
                if maps is not None:  # views of the mapping: no arena to fill first
                    sources = mapped_views(ADAPTER, maps, reader.shards(), [infos[k] for k in staged],
                                           threads=options.get("threads"))
                else:
                    sources = EngineSource(reader).load(ADAPTER, staged, None)  # an arena from the cache
                with torch.no_grad():
                    for k in staged:
                        state[k].copy_(sources[k])
    finally:
        reader.close()
    return keys.missing, keys.unexpected


def save_model(model, filename, *, metadata, force_contiguous, sync):
    state = model.state_dict()
    for kept, names in _remove_duplicate_names(state).items():
        for n in names:
            if metadata is None:
                metadata = {}
            metadata.setdefault(n, kept)
            del state[n]
    if force_contiguous:
        state = {k: v.contiguous() for k, v in state.items()}
    try:
        _write.save_file(ADAPTER, state, filename, metadata=metadata, sync=sync, progress=None)
    except ValueError as e:
        raise ValueError(f"{e} Or use save_model(..., force_contiguous=True), read the docs for potential "
                         f"caveats.") from e

"""Cooperative loading across the ranks of a ``torch.distributed`` process group:
every byte of the checkpoint is fetched from the source once, by one rank, and
the ranks exchange what the others need over the group's collectives (gloo on
CPU, NCCL on GPUs).

    import torch.distributed as dist
    import ringsafe.distributed as rd

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    state = rd.load_file("s3://bucket/model.safetensors.index.json")     # every rank: all tensors
    part = rd.load_file(url, shard={"*.q_proj.weight": 0, "*.o_proj.weight": 1})  # tensor parallel

How it works, on every rank of the group:

1. Each rank opens the checkpoint (its header only) and works out what it needs:
   ``select=`` names/globs, and per tensor a box (``shard=``); the ranks exchange
   these needs (and any error) with one ``all_gather_object``.
2. Every rank computes the same plan from the header and the needs: the bytes
   anyone needs, split into balanced, disjoint shares (a rank first takes what
   only it needs, whole tensors where possible, the rest in file order, cut
   inside tensors only where the balance requires it), each share cut into
   batches that fit ``memory_limit``.
3. Per batch: each rank fetches its part with the engine (straight into its own
   destination when it needs those bytes whole, else into staging) while the
   previous batch is exchanged; an ``all_reduce`` of error flags follows each
   fetch, so a failing rank makes every rank raise the same error; then
   ``broadcast`` for bytes every rank needs (when every rank loads every tensor
   whole, its memory holds the data section as the file does, so each rank's
   share of a batch is one Range-friendly read and one broadcast, straight
   between destinations; otherwise large pieces go one by one into the
   destinations, small ones packed) and one ``all_to_all_single`` per batch for
   bytes only some ranks need (each rank receives only its part).

What it needs from the process group: every rank of ``group`` calls the same
function with the same checkpoint (paths may differ, the headers must not);
broadcast, all_reduce, all_to_all_single, all_gather_object and broadcast_object_list on uint8/int32
tensors (gloo: CPU tensors; NCCL: CUDA tensors on the current device); and a
finite ``timeout=`` given to ``init_process_group``/``new_group``, which bounds
how long the others wait for a rank that died or hangs.

This module is the front end: what each entry point wants and where it lands.
The stages: ``_dist_plan`` (what a rank needs, the plan; pure),
``_dist_exchange`` (the collectives, the agreement on errors, one batch's
exchange) and ``_dist_run`` (one load executed: open, share the needs, plan,
then fetch and exchange batch by batch); each imports only those before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ._errors import error
from ._memory import ViewItem, aligned, new_arena
from ._selection import resolve
from ._torch_adapter import ADAPTER
from ._dist_plan import _image_layout, _needs, box_shape
from ._dist_run import _Destinations, _execute
from ._dist_plan import _BALANCE_SLACK, _Tensor, _flat_interval, plan  # noqa: F401  (the planner's tests use these)

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup
    from typing_extensions import Unpack

    from ._typing import ReaderOptions, Select, Shard, StrPath

__all__ = ["load_file", "read_into", "load_model", "DEFAULT_MEMORY_LIMIT"]

DEFAULT_MEMORY_LIMIT = 1 << 30


# ---------------------------------------------------------------- public API

def load_file(filename: StrPath, group: ProcessGroup | None = None, *, device: str | int | torch.device = "cpu",
              select: Select = None, shard: Shard = None, memory_limit: int = DEFAULT_MEMORY_LIMIT,
              stats: dict[str, Any] | None = None, **options: Unpack[ReaderOptions]) -> dict[str, torch.Tensor]:
    """Loads a checkpoint on every rank of ``group`` (default: the world), each
    byte fetched from the source by one rank only. Returns {name: tensor} on
    every rank, as ``ringsafe.torch.load_file`` would alone.

    ``filename``: a path, http(s)://, s3://, gs://, az:// or hf:// URL, or ``*.index.json`` (each rank
    may spell it differently, e.g. a local mirror; the headers must be equal).
    ``select``: names/globs this rank wants (rank-dependent; [] for nothing).
    ``shard``: what part of each tensor this rank wants (tensor parallelism):
    a dict {name or glob: dim or box} or a callable(name, shape) -> dim or box
    or None. A dim ``d`` splits dimension d evenly across the group's ranks as
    ``torch.tensor_split`` does; a box is a list of (start, stop) pairs or
    slices for the leading dimensions. The returned tensor holds the box.
    ``memory_limit``: staging bytes per rank (fetched bytes others need,
    exchange buffers), whatever the tensors' sizes. ``stats``: a dict to fill
    (fetched_bytes, sent/received_bytes, staging_peak, batches, ...).
    ``options``: the Reader's (connections, http_chunk, threads, ...)."""
    dev = []
    out: dict[str, torch.Tensor] = {}

    def local(group, reader, tensors, by_name):
        dev.append(ADAPTER.check_device(device))
        names = resolve(reader, [t.info.name for t in tensors], select)
        needs = _needs(by_name, names, shard=shard, rank=group.me, world=group.world, check=ADAPTER.check_dtype)
        items, size = [], 0
        image = _image_layout(tensors, needs)
        for n in names:
            t = by_name[n]
            nbytes = t.nbytes(needs[n])
            if image is not None:
                off = image.offsets[n]
                size = image.size
            else:
                size = aligned(size)
                off = size
                size += nbytes
            items.append(ViewItem(n, off, t.info.dtype, box_shape(t, needs[n]), nbytes))
        if group.comm.type == "cpu":
            arena = new_arena(size) if size else b""  # the arena cache's pages, as the local loads use
            views = ADAPTER.views(arena, items)
            raw = torch.frombuffer(arena, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
        else:
            raw = torch.empty(size, dtype=torch.uint8, device=group.comm)
            views = {it.name: ADAPTER.bytes_as(raw[it.offset:it.offset + it.nbytes], it.dtype, it.shape, it.name)
                     for it in items}
        out.update(views)
        if image is not None:
            return _Destinations(needs, views, image=image.offsets, image_bytes=raw)
        return _Destinations(needs, views)

    def finish():
        return {n: (v if v.device == dev[0] else v.to(dev[0])) for n, v in sorted(out.items())}

    return _execute(filename, group, memory_limit=memory_limit, stats=stats, options=options, local=local,
                    finish=finish)


def read_into(filename: StrPath, tensors: dict[str, torch.Tensor], group: ProcessGroup | None = None, *,
              shard: Shard = None, memory_limit: int = DEFAULT_MEMORY_LIMIT, stats: dict[str, Any] | None = None,
              **options: Unpack[ReaderOptions]) -> dict[str, torch.Tensor]:
    """Fills this rank's tensors {name: tensor} in place, cooperatively (see
    ``load_file``). Each tensor holds this rank's box of the checkpoint tensor
    (``shard=``; the whole tensor by default): its dtype and shape are checked
    on every rank before any byte is fetched. On an error, the exception's
    ``incomplete`` lists this rank's tensors that may be partly written; the
    others are untouched or complete."""
    copies = {}

    def local(group, reader, _tensors, by_name):
        if not isinstance(tensors, dict):
            raise TypeError(f"read_into takes a dict {{name: tensor}}, got {type(tensors).__name__}")
        names = list(tensors)
        reader.select(names)
        needs = _needs(by_name, names, shard=shard, rank=group.me, world=group.world, check=ADAPTER.check_dtype)
        dests, caller_owned = {}, set()
        for n in names:
            t, dst = by_name[n], tensors[n]
            if not isinstance(dst, torch.Tensor):
                raise TypeError(f"read_into: tensor '{n}' is a {type(dst).__name__}, not a torch.Tensor")
            part = ADAPTER.empty(t.info.dtype, box_shape(t, needs[n]), "meta", n)  # its torch dtype and shape
            shape = list(part.shape)
            if dst.dtype != part.dtype or list(dst.shape) != shape:
                raise error("InvalidArgument", f"tensor '{n}': this rank's part is {t.info.dtype} {shape}, the "
                                               f"destination is {dst.dtype} {list(dst.shape)}")
            if dst.device == group.comm and dst.is_contiguous():
                dests[n] = dst
                caller_owned.add(n)
            else:
                dests[n] = copies[n] = torch.empty_like(part, device=group.comm)
        return _Destinations(needs, dests, caller_owned=caller_owned)

    def finish():
        with torch.no_grad():
            for n, c in copies.items():
                tensors[n].copy_(c)
        return tensors

    return _execute(filename, group, memory_limit=memory_limit, stats=stats, options=options, local=local,
                    finish=finish)


def load_model(model: torch.nn.Module, filename: StrPath, group: ProcessGroup | None = None, *, strict: bool = True,
               shard: Shard = None, memory_limit: int = DEFAULT_MEMORY_LIMIT, stats: dict[str, Any] | None = None,
               **options: Unpack[ReaderOptions]) -> tuple[set[str], list[str]]:
    """Loads a checkpoint into this rank's model (its parameters and buffers,
    in place), cooperatively (see ``load_file``). A rank's model may hold only
    some of the checkpoint's tensors (pipeline stages) and, with ``shard=``,
    parts of them (tensor parallelism: each parameter's shape must be its
    box's). Returns (missing, unexpected) as ``ringsafe.torch.load_model``;
    strict=True raises RuntimeError on every rank, before any byte is fetched,
    when any rank's model does not match."""
    from ._model import match_keys, size_mismatch
    copies = {}
    result: dict[str, Any] = {}

    def local(group, reader, tensors, by_name):
        state = model.state_dict()
        keys = match_keys(model, state, by_name, strict)
        result["value"] = (keys.missing, keys.unexpected)
        names = [t.info.name for t in tensors if t.info.name in state and t.info.name not in keys.dropped]
        needs = _needs(by_name, names, shard=shard, rank=group.me, world=group.world, check=ADAPTER.check_dtype)
        dests, caller_owned = {}, set()
        for n in names:
            t, p = by_name[n], state[n]
            part = ADAPTER.empty(t.info.dtype, box_shape(t, needs[n]), "meta", n)  # its torch dtype and shape
            shape = list(part.shape)
            if list(p.shape) != shape:
                raise size_mismatch(model, n, shape, p.shape, part=" (this rank's part)")
            if p.device == group.comm and p.is_contiguous() and p.dtype == part.dtype:
                dests[n] = p.detach()
                caller_owned.add(n)
            else:
                dests[n] = copies[n] = torch.empty_like(part, device=group.comm)
        result["state"] = state
        return _Destinations(needs, dests, caller_owned=caller_owned)

    def finish():
        state = result["state"]
        with torch.no_grad():
            for n, c in copies.items():
                state[n].copy_(c)
        return result["value"]

    return _execute(filename, group, memory_limit=memory_limit, stats=stats, options=options, local=local,
                    finish=finish)

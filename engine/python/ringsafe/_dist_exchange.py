"""The exchange stage of ``ringsafe.distributed``: what moves between the ranks.

Its parts, each owning what it holds: ``_Group`` (this rank's end of the
process group: the collectives of one load, each failure of the process group
turned into the load's error, and what they moved counted), ``_Staging`` (the
staging buffers a load holds, counted), ``_Load`` (what a load knows once
planned: the plan, this rank's destinations, how far the batches got) and
``_Exchange``, built from the three: the agreement on errors (when one rank
fails, every rank raises the same error, described and rebuilt on each) and the
movement of one batch's bytes from the ranks that fetched them into every
rank's destinations (broadcasts and one all_to_all_single).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any

import torch
import torch.distributed as dist

from ._errors import error
from . import _ringsafe
from ._ringsafe import SafetensorError, ShardInfo, without_url_secrets
from ._dist_plan import _Batch, _Mode, _file_bytes, _slices


# ---------------------------------------------------------------- errors, from one rank to the others

_REBUILD = {c.__name__: c for c in (ValueError, TypeError, KeyError, IndexError, RuntimeError, MemoryError,
                                     OSError, FileNotFoundError, PermissionError, IsADirectoryError,
                                     NotADirectoryError, TimeoutError, ConnectionError)}


@dataclass(frozen=True)
class _ErrorDescription:
    """What a rank sends the others of an exception (pickled by the object
    collectives): ``cls`` its class's name, ``kind`` the engine's errc name or
    None, ``errno``, ``message``, and ``context`` what the failed fetch was
    reading ("" when no fetch failed)."""

    cls: str
    kind: str | None
    errno: int | None
    message: str
    context: str = ""


def _describe(exc: BaseException, context: str = "") -> _ErrorDescription:
    """The _ErrorDescription of ``exc`` (``context``: what the failed fetch read).
    A system error is named by its OSError class (the engine's are both it and
    SafetensorError, and are rebuilt so)."""
    if isinstance(exc, KeyboardInterrupt):
        return _ErrorDescription("SafetensorError", "Cancelled", None, "interrupted (KeyboardInterrupt)", context)
    kind = getattr(exc, "kind", None)
    if isinstance(exc, OSError):
        name = next(c.__name__ for c in type(exc).__mro__ if issubclass(c, OSError) and c.__module__ == "builtins")
    else:
        name = "SafetensorError" if isinstance(exc, SafetensorError) else type(exc).__name__
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        msg = exc.strerror  # the engine's names the path already
        if not isinstance(exc, SafetensorError) and exc.filename:
            msg += f": '{exc.filename}'"
    else:
        msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return _ErrorDescription(name, kind, getattr(exc, "errno", None), msg, context)


def _rebuild(desc: _ErrorDescription, text: str) -> BaseException:
    """An exception like the one ``desc`` describes, with message ``text``
    (shown as errors are: a URL's signing values written "...")."""
    name, kind, errno = desc.cls, desc.kind, desc.errno
    text = without_url_secrets(text)
    if name == "SafetensorError":
        return error(kind or "DistributedError", text)
    cls = _REBUILD.get(name)
    if cls is None:
        return error("DistributedError", f"{text} ({name})")
    if issubclass(cls, OSError) and errno is not None:
        e: Any = getattr(_ringsafe, name, cls)(errno, text)  # both the OSError and SafetensorError, as raised
        e.kind = kind
        return e
    return cls(text)


def _names(names, most=8):
    """Up to ``most`` of ``names``, sorted and quoted, then how many more."""
    names = sorted(names)
    shown = ", ".join(f"'{n}'" for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


# ---------------------------------------------------------------- the rank's end of the group

class _CollectiveFailed(Exception):
    """A collective of a _Group failed: ``what`` it was, ``cause`` the process group's
    error. The load that ran it raises its DistributedError instead (_Run), so the
    group needs no reference back to the load."""

    def __init__(self, what, cause):
        super().__init__(what, cause)
        self.what, self.cause = what, cause


class _Group:
    """This rank's end of a process group for one load: its rank ``me``, the group's
    size ``world``, ``comm`` the device its collectives take tensors on, and the
    collectives, what they move counted in ``stats``. It refers to nothing that refers
    back to it, so the process group is free to go when the load returns."""

    def __init__(self, group, stats):
        """This rank's end of ``group`` (None: the world); ``stats`` the load's counters."""
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ringsafe.distributed needs an initialized torch.distributed process group: call "
                               "torch.distributed.init_process_group(...) first (or use ringsafe.torch to load alone)")
        self.process_group: Any = group if group is not None else dist.group.WORLD
        self.me = dist.get_rank(self.process_group)
        if self.me < 0:
            raise RuntimeError("this process is not a member of the process group it was given")
        self.world = dist.get_world_size(self.process_group)
        backend = str(dist.get_backend(self.process_group)).lower()
        self.comm = torch.device("cuda", torch.cuda.current_device()) if "nccl" in backend else torch.device("cpu")
        self.stats = stats

    def src(self, r):
        """The global rank of the group's rank ``r`` (what ``src=`` takes)."""
        return dist.get_global_rank(self.process_group, r) if self.process_group is not dist.group.WORLD else r

    def collective(self, what, fn, *args, **kwargs):
        """Calls the collective ``fn`` on the group; a failure raises _CollectiveFailed(what, its error)."""
        try:
            return fn(*args, group=self.process_group, **kwargs)
        except SafetensorError:
            raise
        except Exception as e:  # a peer died, a timeout, a broken connection
            raise _CollectiveFailed(what, e) from e

    def gather(self, what, obj):
        """Collective: every rank's ``obj``, in rank order."""
        gathered = [None] * self.world
        self.collective(what, dist.all_gather_object, gathered, obj)
        return gathered

    def broadcast(self, what, buf, owner, nbytes):
        """Collective: ``buf`` (``nbytes`` of it counted) from group rank ``owner`` to every rank."""
        self.collective(what, dist.broadcast, buf, src=self.src(owner))
        self.stats["broadcasts"] += 1
        if owner == self.me:
            self.stats["sent_bytes"] += nbytes * (self.world - 1)
        else:
            self.stats["received_bytes"] += nbytes

    def all_to_all(self, what, recv, send, *, recv_sizes, send_sizes):
        """Collective: ``send`` split by ``send_sizes`` to each rank, ``recv`` filled from
        each by ``recv_sizes`` (bytes, in rank order)."""
        self.collective(what, dist.all_to_all_single, recv, send, output_split_sizes=recv_sizes,
                        input_split_sizes=send_sizes)
        self.stats["all_to_alls"] += 1
        self.stats["sent_bytes"] += sum(send_sizes)
        self.stats["received_bytes"] += sum(recv_sizes)


class _Staging:
    """The staging buffers of one load, counted: ``live`` bytes held now, their peak
    in ``stats["staging_peak"]``; on ``device`` unless a buffer asks for another."""

    def __init__(self, stats, device):
        self.stats = stats
        self.device = device
        self.live = 0

    def stage(self, n, device=None):
        """A staging buffer of ``n`` bytes, counted in ``staging_peak`` until ``unstage(n)``."""
        self.live += n
        self.stats["staging_peak"] = max(self.stats["staging_peak"], self.live)
        return torch.empty(n, dtype=torch.uint8, device=device or self.device)

    def unstage(self, n):
        """Stops counting ``n`` bytes of staging."""
        self.live -= n


# ---------------------------------------------------------------- what a load knows

@dataclass
class _Load:
    """What this rank's load knows once planned, and how far it got.

    ``me``: this rank in the group; ``shards``: the reader's ShardInfo records;
    ``needs``: per rank, {name: element box}; ``dests``: {name: tensor}, this
    rank's destinations, and ``dest_bytes`` {name: uint8 view of one, shaped as
    its byte box}; ``caller_owned``: the names of those the caller gave (partly
    written on an error); ``batches``: the plan (_dist_plan.plan); ``image``:
    {name: offset} when every rank's destinations are images of the data, then
    ``image_bytes`` this rank's, one flat uint8 tensor; ``first_batch`` and
    ``last_batch``: {name: first / last batch touching this rank's destination};
    ``started_batches`` (whose fetch began), ``done_batches`` (exchanged) and
    ``fetch_context`` (what the failed fetch was reading, for messages)."""

    me: int
    shards: list[ShardInfo]
    needs: list[dict[str, Any]]
    dests: dict[str, torch.Tensor]
    dest_bytes: dict[str, torch.Tensor]
    caller_owned: set[str]
    batches: list[_Batch]
    image: dict[str, int] | None
    image_bytes: Any
    first_batch: dict[str, int]
    last_batch: dict[str, int]
    started_batches: int = 0
    done_batches: int = 0
    fetch_context: str = ""

    def dest_view(self, u, box):
        """This rank's destination bytes of ``box`` of the unit's tensor."""
        t = u.t
        need = self.needs[self.me][t.info.name]
        return self.dest_bytes[t.info.name][_slices(t.byte_box(box), t.byte_box(need))]

    def incomplete(self):
        """Caller-owned destinations possibly written but not complete: touched by a started
        batch and not finished by an exchanged one."""
        return {n for n in self.caller_owned if n in self.last_batch
                and self.first_batch[n] < self.started_batches and self.last_batch[n] >= self.done_batches}


def _with_incomplete(e, load):
    """``e`` with ``e.incomplete`` set to the destinations of ``load`` (None: not planned
    yet) that may be partly written, named in its message."""
    names = sorted(load.incomplete()) if load is not None and load.batches else []
    e.incomplete = names
    if names:
        e.args = (f"{e.args[0]}; on rank {load.me} these destination tensors may be partly written: "
                  f"{_names(names)}",)
    return e


# ---------------------------------------------------------------- one batch's exchange

@dataclass
class _BatchState:
    """One batch between its fetch and its exchange: ``bufs`` {unit key: tensor}
    holding the fetched pieces, ``packed`` this rank's packed block (small pieces
    every rank needs), ``cpu`` {unit key: host bounce buffer} when the group
    exchanges device tensors, ``staged`` the staging bytes to release, ``job``
    the engine's fetch in flight, ``context`` what the fetch reads (for errors)."""

    k: int
    bufs: dict = field(default_factory=dict)
    packed: Any = None
    cpu: dict = field(default_factory=dict)
    staged: int = 0
    job: Any = None
    context: str = ""


class _Exchange:
    """The agreement on errors and each batch's exchange of ``load`` over ``group``
    (a _Group), its buffers from ``staging`` (a _Staging)."""

    def __init__(self, group, staging, load):
        self.group = group
        self.staging = staging
        self.load = load

    def agree(self, exc, what):
        """Collective: raises the same error on every rank when any rank's ``exc`` is set."""
        g = self.group
        flags = torch.zeros(g.world, dtype=torch.int32, device=g.comm)
        if exc is not None:
            flags[g.me] = 1
        g.collective(what, dist.all_reduce, flags)
        failed = [r for r, f in enumerate(flags.tolist()) if f]
        if not failed:
            return
        src = failed[0]
        box: list[_ErrorDescription | None] = [None]
        if g.me == src and exc is not None:  # src's flag is set by its own exc
            box[0] = _describe(exc, self.load.fetch_context)
        kw = {"device": g.comm} if g.comm.type != "cpu" else {}
        g.collective(what, dist.broadcast_object_list, box, src=g.src(src), **kw)
        desc = box[0]
        if not isinstance(desc, _ErrorDescription):
            raise error("DistributedError", f"rank {src} of {g.world} failed and sent no description of its error")
        others = f" (ranks {', '.join(map(str, failed))} failed)" if len(failed) > 1 else ""
        text = f"rank {src} of {g.world}{others}: {desc.context + ': ' if desc.context else ''}{desc.message}"
        e = _with_incomplete(_rebuild(desc, text), self.load)
        e.rank = src
        try:
            if isinstance(exc, KeyboardInterrupt):
                raise exc  # the others raise "interrupted"; this rank's caller sees Ctrl-C
            if exc is not None:
                raise e from exc
            raise e
        finally:
            e = exc = None  # a raised exception held by its own frame is a cycle (see _dist_run)

    def exchange(self, state):
        """Collective: moves one fetched batch (a _BatchState from ``prepare``) into every
        rank's destinations, then releases its staging."""
        batches = self.load.batches
        batch = batches[state.k]
        what = f"the exchange of batch {state.k + 1} of {len(batches)}"
        self._exchange_packed(batch, state.packed, what)
        self._exchange_runs(batch, state.bufs, what)
        if batch.a2a:
            self._exchange_a2a(batch, state.bufs, what)
        self._copy_own(batch, state.bufs)
        state.bufs, state.packed, state.cpu = {}, None, {}
        self.staging.unstage(state.staged)
        self.load.done_batches = state.k + 1

    def _exchange_packed(self, batch, packed, what):
        """Small pieces every rank needs: one broadcast per owner of its packed block."""
        me = self.group.me
        for o in range(self.group.world):
            size = batch.packed_size[o]
            if not size:
                continue
            buf = packed if o == me else self.staging.stage(size)
            self.group.broadcast(what, buf, o, size)
            off = 0
            for u in batch.packed[o]:
                v = self.load.dest_view(u, u.box)
                v.copy_(buf[off:off + u.nbytes].view(v.shape))
                off += u.nbytes
            if o != me:
                del buf
                self.staging.unstage(size)

    def _exchange_runs(self, batch, bufs, what):
        """Large pieces every rank needs: straight between destinations where they are contiguous."""
        me, load = self.group.me, self.load
        for run in batch.runs:
            if load.image is not None:  # a run of the data section, at the same offsets on every rank
                first, last = run[0], run[-1]
                a = load.image[first.t.info.name] + _file_bytes(first).first - first.t.info.begin
                b = load.image[last.t.info.name] + _file_bytes(last).end - last.t.info.begin
                self.group.broadcast(what, load.image_bytes[a:b], first.owner, b - a)
                continue
            u = run[0]
            v = load.dest_view(u, u.box)
            if u.owner == me:
                buf = bufs[u.key]
            else:
                buf = v if v.is_contiguous() else self.staging.stage(u.nbytes).view(v.shape)
            self.group.broadcast(what, buf, u.owner, u.nbytes)
            if buf.data_ptr() != v.data_ptr():
                v.copy_(buf)
                if u.owner != me:
                    self.staging.unstage(u.nbytes)
            del buf

    def _a2a_pieces(self, batch, sending):
        """(unit, box, bytes) of each all_to_all piece this rank sends (to each
        rank in rank order) or receives (from each), in the order of the flat buffers."""
        me = self.group.me
        for r in range(self.group.world):
            if r == me:
                continue
            for u in batch.a2a:
                if sending and u.owner == me and r in u.inters:
                    yield u, u.inters[r], r
                elif not sending and u.owner == r and me in u.inters:
                    yield u, u.inters[me], r

    def _exchange_a2a(self, batch, bufs, what):
        """Pieces only some ranks need: each receives just its part, in one all_to_all."""
        send_sizes = [0] * self.group.world
        recv_sizes = [0] * self.group.world
        for u, box, r in self._a2a_pieces(batch, True):
            send_sizes[r] += u.t.nbytes(box)
        for u, box, r in self._a2a_pieces(batch, False):
            recv_sizes[r] += u.t.nbytes(box)
        send = self.staging.stage(sum(send_sizes))
        off = 0
        for u, box, _ in self._a2a_pieces(batch, True):
            src = bufs[u.key][_slices(u.t.byte_box(box), u.t.byte_box(u.box))]
            n = u.t.nbytes(box)
            send[off:off + n].view(src.shape).copy_(src)
            off += n
        recv = self.staging.stage(sum(recv_sizes))
        self.group.all_to_all(what, recv, send, recv_sizes=recv_sizes, send_sizes=send_sizes)
        off = 0
        for u, box, _ in self._a2a_pieces(batch, False):
            v = self.load.dest_view(u, box)
            n = u.t.nbytes(box)
            v.copy_(recv[off:off + n].view(v.shape))
            off += n
        del send, recv
        self.staging.unstage(sum(send_sizes) + sum(recv_sizes))

    def _copy_own(self, batch, bufs):
        """This rank's own part of what it fetched into staging."""
        me = self.group.me
        for u in batch.units:
            if u.owner != me or u.mode not in (_Mode.LOCAL, _Mode.A2A) or me not in u.inters:
                continue
            box = u.inters[me]
            v = self.load.dest_view(u, box)
            src = bufs[u.key][_slices(u.t.byte_box(box), u.t.byte_box(u.box))]
            if src.data_ptr() != v.data_ptr():
                v.copy_(src)

"""The exchange stage of ``ringsafe.distributed``: what moves between the ranks.

The collectives of one load (each failure of the process group turned into a
``DistributedError`` that names the operation), the agreement on errors (when
one rank fails, every rank raises the same error, described and rebuilt on
each) and the movement of one batch's bytes from the ranks that fetched them
into every rank's destinations (broadcasts and one all_to_all_single).
"""

from dataclasses import dataclass, field

from typing import Any

import torch
import torch.distributed as dist

from ._errors import error
from . import _ringsafe
from ._ringsafe import SafetensorError
from ._dist_plan import _A2A, _LOCAL, _file_bytes, _slices


# ---------------------------------------------------------------- errors, from one rank to the others

_REBUILD = {c.__name__: c for c in (ValueError, TypeError, KeyError, IndexError, RuntimeError, MemoryError,
                                     OSError, FileNotFoundError, PermissionError, IsADirectoryError,
                                     NotADirectoryError, TimeoutError, ConnectionError)}


def _describe(exc):
    """(class name, kind, errno, message) of an exception: what a rank sends the others.
    A system error is named by its OSError class (the engine's are both it and
    SafetensorError, and are rebuilt so)."""
    if isinstance(exc, KeyboardInterrupt):
        return ("SafetensorError", "Cancelled", None, "interrupted (KeyboardInterrupt)")
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
    return (name, kind, getattr(exc, "errno", None), msg)


def _rebuild(desc, text):
    """An exception like the one ``desc`` describes (``_describe``), with message ``text``."""
    name, kind, errno, _ = desc
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
    """This rank's end of the process group for one load: its collectives, the
    agreement on errors, the staging it counts and the exchange of each batch.
    The load (``_Run``) fills in what a load knows (``spec``, ``batches``,
    ``image``/``image_bytes``, ``done_batches``, ``fetch_context``) and provides
    ``dest_view`` and ``incomplete``; every one is declared here."""

    def __init__(self, group, stats):
        """This rank's end of ``group`` (None: the world): its rank ``me``, the group's size
        ``world``, and ``comm``, the device its collectives take tensors on; ``stats`` the
        load's counters."""
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ringsafe.distributed needs an initialized torch.distributed process group: call "
                               "torch.distributed.init_process_group(...) first (or use ringsafe.torch to load alone)")
        self.group: Any = group if group is not None else dist.group.WORLD
        self.me = dist.get_rank(self.group)
        if self.me < 0:
            raise RuntimeError("this process is not a member of the process group it was given")
        self.world = dist.get_world_size(self.group)
        backend = str(dist.get_backend(self.group)).lower()
        self.comm = torch.device("cuda", torch.cuda.current_device()) if "nccl" in backend else torch.device("cpu")
        self.stats = stats
        self.live = 0            # staging bytes held now (stage/unstage)
        self.spec = ""           # what the load opened, for messages
        self.fetch_context = ""  # what the failed fetch was reading, for messages
        self.batches = []        # the plan's batches (_dist_plan.plan)
        self.done_batches = 0    # batches exchanged
        self.image: Any = None        # {name: offset} when this rank's destinations are images of the data
        self.image_bytes: Any = None  # the destinations' bytes then, one flat uint8 tensor

    def dest_view(self, u, box):
        """This rank's destination bytes of ``box`` of the unit's tensor (the load's)."""
        raise NotImplementedError

    def incomplete(self):
        """This rank's destinations that may be partly written (the load's)."""
        raise NotImplementedError

    # -- staging ----------------------------------------------------------------
    def stage(self, n, device=None):
        """A staging buffer of ``n`` bytes, counted in ``staging_peak`` until ``unstage(n)``."""
        self.live += n
        self.stats["staging_peak"] = max(self.stats["staging_peak"], self.live)
        return torch.empty(n, dtype=torch.uint8, device=device or self.comm)

    def unstage(self, n):
        """Stops counting ``n`` bytes of staging."""
        self.live -= n

    # -- collectives ------------------------------------------------------------
    def _src(self, r):
        """The global rank of the group's rank ``r`` (what ``src=`` takes)."""
        return dist.get_global_rank(self.group, r) if self.group is not dist.group.WORLD else r

    def _collective(self, what, fn, *args, **kwargs):
        """Calls the collective ``fn`` on the group; a failure raises a DistributedError naming ``what``."""
        try:
            return fn(*args, group=self.group, **kwargs)
        except SafetensorError:
            raise
        except Exception as e:  # a peer died, a timeout, a broken connection
            raise self._comm_error(what, e) from e

    def _comm_error(self, what, exc):
        """The DistributedError for a collective that failed (``what``: which one)."""
        text = (f"rank {self.me} of {self.world}: {what} failed while loading {self.spec!r} (another rank died, "
                f"hung past the process group's timeout, or lost its connection): {exc}")
        return self._with_incomplete(error("DistributedError", text))

    def _with_incomplete(self, e):
        """Sets ``e.incomplete`` to this rank's partly written destinations, named in its message."""
        names = sorted(self.incomplete()) if self.batches else []
        e.incomplete = names
        if names:
            e.args = (f"{e.args[0]}; on rank {self.me} these destination tensors may be partly written: "
                      f"{_names(names)}",)
        return e

    def agree(self, exc, what):
        """Collective: raises the same error on every rank when any rank's ``exc`` is set."""
        flags = torch.zeros(self.world, dtype=torch.int32, device=self.comm)
        if exc is not None:
            flags[self.me] = 1
        self._collective(what, dist.all_reduce, flags)
        failed = [r for r, f in enumerate(flags.tolist()) if f]
        if not failed:
            return
        src = failed[0]
        box: list[Any] = [_describe(exc) + (self.fetch_context,) if self.me == src else None]
        kw = {"device": self.comm} if self.comm.type != "cpu" else {}
        self._collective(what, dist.broadcast_object_list, box, src=self._src(src), **kw)
        desc = box[0]
        others = f" (ranks {', '.join(map(str, failed))} failed)" if len(failed) > 1 else ""
        text = f"rank {src} of {self.world}{others}: {desc[4] + ': ' if desc[4] else ''}{desc[3]}"
        e = self._with_incomplete(_rebuild(desc[:4], text))
        e.rank = src
        if isinstance(exc, KeyboardInterrupt):
            raise exc  # the others raise "interrupted"; this rank's caller sees Ctrl-C
        if exc is not None:
            raise e from exc
        raise e

    def _gather(self, what, obj):
        """Collective: every rank's ``obj``, in rank order."""
        gathered = [None] * self.world
        self._collective(what, dist.all_gather_object, gathered, obj)
        return gathered

    def exchange(self, state):
        """Collective: moves one fetched batch (a _BatchState from ``prepare``) into every
        rank's destinations, then releases its staging."""
        batch = self.batches[state.k]
        what = f"the exchange of batch {state.k + 1} of {len(self.batches)}"
        self._exchange_packed(batch, state.packed, what)
        self._exchange_runs(batch, state.bufs, what)
        if batch.a2a:
            self._exchange_a2a(batch, state.bufs, what)
        self._copy_own(batch, state.bufs)
        state.bufs, state.packed, state.cpu = {}, None, {}
        self.unstage(state.staged)
        self.done_batches = state.k + 1

    def _broadcast(self, what, buf, owner, nbytes):
        """Collective: ``buf`` (``nbytes`` of it counted) from group rank ``owner`` to every rank."""
        self._collective(what, dist.broadcast, buf, src=self._src(owner))
        self.stats["broadcasts"] += 1
        if owner == self.me:
            self.stats["sent_bytes"] += nbytes * (self.world - 1)
        else:
            self.stats["received_bytes"] += nbytes

    def _exchange_packed(self, batch, packed, what):
        """Small pieces every rank needs: one broadcast per owner of its packed block."""
        me = self.me
        for o in range(self.world):
            size = batch.packed_size[o]
            if not size:
                continue
            buf = packed if o == me else self.stage(size)
            self._broadcast(what, buf, o, size)
            off = 0
            for u in batch.packed[o]:
                v = self.dest_view(u, u.box)
                v.copy_(buf[off:off + u.nbytes].view(v.shape))
                off += u.nbytes
            if o != me:
                del buf
                self.unstage(size)

    def _exchange_runs(self, batch, bufs, what):
        """Large pieces every rank needs: straight between destinations where they are contiguous."""
        me = self.me
        for run in batch.runs:
            if self.image is not None:  # a run of the data section, at the same offsets on every rank
                first, last = run[0], run[-1]
                a = self.image[first.t.info.name] + _file_bytes(first)[1] - first.t.info.begin
                b = self.image[last.t.info.name] + _file_bytes(last)[2] - last.t.info.begin
                self._broadcast(what, self.image_bytes[a:b], first.owner, b - a)
                continue
            u = run[0]
            v = self.dest_view(u, u.box)
            if u.owner == me:
                buf = bufs[u.key]
            else:
                buf = v if v.is_contiguous() else self.stage(u.nbytes).view(v.shape)
            self._broadcast(what, buf, u.owner, u.nbytes)
            if buf.data_ptr() != v.data_ptr():
                v.copy_(buf)
                if u.owner != me:
                    self.unstage(u.nbytes)
            del buf

    def _a2a_pieces(self, batch, sending):
        """(unit, box, bytes) of each all_to_all piece this rank sends (to each
        rank in rank order) or receives (from each), in the order of the flat buffers."""
        me = self.me
        for r in range(self.world):
            if r == me:
                continue
            for u in batch.a2a:
                if sending and u.owner == me and r in u.inters:
                    yield u, u.inters[r], r
                elif not sending and u.owner == r and me in u.inters:
                    yield u, u.inters[me], r

    def _exchange_a2a(self, batch, bufs, what):
        """Pieces only some ranks need: each receives just its part, in one all_to_all."""
        send_sizes = [0] * self.world
        recv_sizes = [0] * self.world
        for u, box, r in self._a2a_pieces(batch, True):
            send_sizes[r] += u.t.nbytes(box)
        for u, box, r in self._a2a_pieces(batch, False):
            recv_sizes[r] += u.t.nbytes(box)
        send = self.stage(sum(send_sizes))
        off = 0
        for u, box, _ in self._a2a_pieces(batch, True):
            src = bufs[u.key][_slices(u.t.byte_box(box), u.t.byte_box(u.box))]
            n = u.t.nbytes(box)
            send[off:off + n].view(src.shape).copy_(src)
            off += n
        recv = self.stage(sum(recv_sizes))
        self._collective(what, dist.all_to_all_single, recv, send, output_split_sizes=recv_sizes,
                         input_split_sizes=send_sizes)
        self.stats["all_to_alls"] += 1
        self.stats["sent_bytes"] += sum(send_sizes)
        self.stats["received_bytes"] += sum(recv_sizes)
        off = 0
        for u, box, _ in self._a2a_pieces(batch, False):
            v = self.dest_view(u, box)
            n = u.t.nbytes(box)
            v.copy_(recv[off:off + n].view(v.shape))
            off += n
        del send, recv
        self.unstage(sum(send_sizes) + sum(recv_sizes))

    def _copy_own(self, batch, bufs):
        """This rank's own part of what it fetched into staging."""
        me = self.me
        for u in batch.units:
            if u.owner != me or u.mode not in (_LOCAL, _A2A) or me not in u.inters:
                continue
            box = u.inters[me]
            v = self.dest_view(u, box)
            src = bufs[u.key][_slices(u.t.byte_box(box), u.t.byte_box(u.box))]
            if src.data_ptr() != v.data_ptr():
                v.copy_(src)

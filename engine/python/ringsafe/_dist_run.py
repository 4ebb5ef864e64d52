"""The run stage of ``ringsafe.distributed``: one cooperative load, executed.

``_Run`` opens the checkpoint, has the front end work out this rank's needs and
destinations, shares them with the other ranks, plans, then per batch fetches
this rank's share with the engine (the next batch's fetch in flight during this
one's exchange), agrees on errors and exchanges. ``_execute`` drives it for the
front end's ``load_file``, ``read_into`` and ``load_model``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ._described import AddressedRequest
from ._errors import error
from ._source import open_reader
from ._ringsafe import http_connections, plan_requests_at
from ._dist_plan import Box, _Mode, _Tensor, _file_bytes, plan
from ._dist_exchange import (_BatchState, _CollectiveFailed, _ErrorDescription, _Exchange, _Group, _Load, _Staging,
                              _describe, _rebuild, _with_incomplete)


# ---------------------------------------------------------------- what the front end tells a load

@dataclass
class _Destinations:
    """What the front end's ``local`` works out on this rank once the checkpoint is open:
    ``needs`` {name: element box} and ``dests`` {name: tensor} (contiguous, on the group's
    device, shaped as the box); ``caller_owned`` the names of those the caller gave (partly
    written on an error); ``image`` {name: offset} when every destination is a view of
    ``image_bytes``, one flat uint8 tensor holding the data as the files do
    (_dist_plan._image_layout)."""

    needs: dict[str, Box]
    dests: dict[str, torch.Tensor]
    caller_owned: set[str] = field(default_factory=set)
    image: dict[str, int] | None = None
    image_bytes: Any = None


@dataclass(frozen=True)
class _Opened:
    """What a rank tells the others once it opened the checkpoint (pickled by
    ``all_gather_object``): ``digest`` of the headers it read (_digest),
    ``needs`` {name: element box}, ``image`` whether its destinations are an
    image of the data (_Destinations.image); or in their place ``error``, the
    description of what it raised."""

    digest: str = ""
    needs: dict[str, Box] = field(default_factory=dict)
    image: bool = False
    error: _ErrorDescription | None = None


# ---------------------------------------------------------------- the run

class _Run:
    """One cooperative load of ``filename`` on this rank: ``start`` (open, needs, plan),
    ``run`` (fetch and exchange every batch), ``close``. Its parts: ``group`` (this
    rank's end of the process group), ``staging``, and from ``start`` on ``load``
    (what the load knows).

    Nothing of a load may outlive the call: the caller's ``destroy_process_group()``
    must free the backend at once (gloo's threads, left to the cyclic collector, can
    run at interpreter exit and abort the process). So no part refers back to the
    _Run, a collective's failure comes back as _CollectiveFailed for the _Run to
    name, and a frame that keeps an exception its traceback holds lets go of it
    before the exception leaves (exception -> traceback -> frame -> exception is a
    cycle, and frames hold their callers', the caller's group among them)."""

    def __init__(self, filename, group, *, memory_limit, stats):
        stats = stats if stats is not None else {}
        self.group = _Group(group, stats)
        self.filename = filename
        self.spec = str(filename)  # what the load opened, for messages
        self.memory_limit = memory_limit
        self.batch_bytes = 0       # a batch's share per rank (_check_limit)
        self.stats = stats
        self.stats.update(fetched_bytes=0, fetch_requests=0, sent_bytes=0, received_bytes=0, staging_peak=0,
                          batches=0, broadcasts=0, all_to_alls=0, memory_limit=memory_limit,
                          rank=self.group.me, world_size=self.group.world, fetch_wait_s=0.0, agree_s=0.0,
                          exchange_s=0.0)
        self.staging = _Staging(stats, self.group.comm)
        self.reader: Any = None
        self.load: _Load | None = None

    # -- phases ----------------------------------------------------------------
    def _check_limit(self):
        """Validates ``memory_limit`` and derives ``batch_bytes``, a batch's share per rank."""
        limit, world = self.memory_limit, self.group.world
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"memory_limit must be a positive int (bytes), got {limit!r}")
        # Live staging, worst case per rank: two batches' fetches (one being exchanged, the
        # next in flight) + all_to_all send and receive buffers of (world - 1) pieces each.
        parts = 2 * world + (2 if self.group.comm.type != "cpu" else 0)
        self.batch_bytes = limit // parts
        if self.batch_bytes < 4096:
            raise ValueError(f"memory_limit={limit} is too small for {world} ranks (at least {parts * 4096} "
                             f"bytes)")

    def start(self, options, local):
        """Opens, works out this rank's destinations (``local(group, reader, tensors, by_name)
        -> _Destinations``), exchanges needs and errors (every rank raises any rank's), and
        plans; returns the ``load``."""
        opened, exc = None, None
        try:
            try:
                shards, tensors, by_name, mine = self._open(options, local)
                opened = _Opened(_digest(shards, tensors), mine.needs, mine.image is not None)
            except Exception as e:
                exc = e
                opened = _Opened(error=_describe(e))
            gathered = self._collective(self.group.gather, "exchanging the ranks' needs", opened)
            self._agree_on_needs(gathered, exc)
        finally:
            exc = None
        self.load = self._plan(gathered, shards=shards, tensors=tensors, by_name=by_name, mine=mine)
        return self.load

    def _collective(self, fn, *args):
        """``fn(*args)``, a collective of the group's or the exchange's; its failure
        raises the load's DistributedError (_comm_error)."""
        try:
            return fn(*args)
        except _CollectiveFailed as f:
            raise self._comm_error(f.what, f.cause) from f.cause

    def _plan(self, gathered: list[_Opened], *, shards: list[Any], tensors: list[_Tensor],
              by_name: dict[str, _Tensor], mine: _Destinations) -> _Load:
        """This rank's _Load: the plan every rank computes from what each rank told
        (``gathered``, their _Opened), with this rank's destinations (``mine``, its
        _Destinations) laid out for it."""
        needs = [g.needs for g in gathered]
        image = mine.image if all(g.image for g in gathered) else None
        self.stats["layout"] = "image" if image is not None else "packed"
        batches = plan(tensors, needs, world=self.group.world, batch_bytes=self.batch_bytes, image=image is not None)
        self.stats["batches"] = len(batches)
        # The first and last batch touching each of this rank's destinations (to name incomplete ones).
        me = self.group.me
        first_batch: dict[str, int] = {}
        last_batch: dict[str, int] = {}
        for k, b in enumerate(batches):
            for u in b.units:
                if me in u.inters:
                    first_batch.setdefault(u.t.info.name, k)
                    last_batch[u.t.info.name] = k
        dest_bytes = {}
        for name, box in needs[me].items():
            t = by_name[name]
            if t.nbytes(box):
                dest_bytes[name] = _bytes_of(mine.dests[name]).view([e - s for s, e in t.byte_box(box)])
        return _Load(me=me, shards=shards, needs=needs, dests=mine.dests, dest_bytes=dest_bytes,
                     caller_owned=mine.caller_owned, batches=batches, image=image,
                     image_bytes=mine.image_bytes if image is not None else None, first_batch=first_batch,
                     last_batch=last_batch)

    def _open(self, options, local):
        """Opens the checkpoint and asks the front end for this rank's destinations:
        (the reader's shards, its tensors as _Tensor records in data order, {name: _Tensor},
        the front end's _Destinations)."""
        self._check_limit()
        if options.get("http_chunk") is None:
            # Each batch's Range requests spread over the connections (two rounds of them).
            per = self.batch_bytes // (2 * http_connections(options.get("connections")))
            options = dict(options, http_chunk=max(256 << 10, min(8 << 20, per >> 16 << 16)))
        self.reader = open_reader(self.filename, options)
        infos = self.reader.tensors()
        shards = self.reader.shards()
        tensors = [_Tensor(info, i) for i, info in enumerate(infos)]
        by_name = {t.info.name: t for t in tensors}
        return shards, tensors, by_name, local(self.group, self.reader, tensors, by_name)

    def _agree_on_needs(self, gathered: list[_Opened], exc: BaseException | None) -> None:
        """Raises on every rank when any rank failed to open (that rank's error) or
        the ranks opened different checkpoints."""
        world = self.group.world
        failed = [r for r in range(world) if gathered[r].error is not None]
        if failed:
            src = failed[0]
            desc = gathered[src].error
            assert desc is not None  # failed lists the ranks with one
            others = f" (ranks {', '.join(map(str, failed))} failed)" if len(failed) > 1 else ""
            e: Any = _rebuild(desc, f"rank {src} of {world}{others}: {desc.message}")
            e.rank = src
            self.close()
            try:
                if exc is not None:
                    raise e from exc
                raise e
            finally:
                e = exc = None
        digests = [g.digest for g in gathered]
        if len(set(digests)) > 1:
            odd = [r for r in range(world) if digests[r] != digests[0]]
            self.close()
            raise error("DistributedError", f"the ranks opened different checkpoints: the header (or the hf:// "
                                            f"commit) that ranks {', '.join(map(str, odd))} "
                                            f"of {world} read differs from rank 0's")

    def _comm_error(self, what, exc):
        """The DistributedError for a collective that failed (``what``: which one)."""
        text = (f"rank {self.group.me} of {self.group.world}: {what} failed while loading {self.spec!r} (another "
                f"rank died, hung past the process group's timeout, or lost its connection): {exc}")
        return _with_incomplete(error("DistributedError", text), self.load)

    def _file_range(self, load, u):
        """(file, first byte, end byte) the unit's bytes span in its file."""
        span = _file_bytes(u)
        s = load.shards[span.shard]
        return s.spec, s.data_start + span.first, s.data_start + span.end

    def prepare(self, load, k):
        """Buffers for this rank's units of batch k of ``load``; starts their fetch. Returns the batch state."""
        me, stage = self.group.me, self.staging.stage
        batch = load.batches[k]
        mine = [u for u in batch.units if u.owner == me and u.mode != _Mode.SKIP]
        state = _BatchState(k)
        load.started_batches = max(load.started_batches, k + 1)
        if not mine:
            return state
        packed_size = batch.packed_size[me]
        if packed_size:
            state.packed = stage(packed_size)
            state.staged += packed_size
        off = 0
        reqs, keep = [], []
        for u in mine:
            shape = [e - s for s, e in u.t.byte_box(u.box)]
            if u.mode == _Mode.BCASTP:
                buf = state.packed[off:off + u.nbytes].view(shape)
                off += u.nbytes
            else:
                buf = None
                if u.inters.get(me) == u.box:
                    v = load.dest_view(u, u.box)
                    if v.is_contiguous():
                        buf = v
                if buf is None:
                    buf = stage(u.nbytes).view(shape)
                    state.staged += u.nbytes
            state.bufs[u.key] = buf
            target = buf
            if self.group.comm.type != "cpu":
                target = stage(u.nbytes, torch.device("cpu"))
                state.staged += u.nbytes
                state.cpu[u.key] = target
            reqs.append(AddressedRequest(u.t.info.name, u.t.engine_box(u.box), target.data_ptr(), u.nbytes))
            keep.append(target)
        ranges: dict[str, tuple[int, int]] = {}
        for u in mine:
            spec, a, b = self._file_range(load, u)
            lo, hi = ranges.get(spec, (a, b))
            ranges[spec] = (min(lo, a), max(hi, b))
        state.context = "; ".join(f"fetching bytes {a}-{b - 1} of {spec}" for spec, (a, b) in ranges.items())
        state.context += f" (batch {k + 1} of {len(load.batches)})"
        self.stats["fetched_bytes"] += sum(u.nbytes for u in mine)
        self.stats["fetch_requests"] += len(reqs)
        plan_ = plan_requests_at(self.reader, reqs, keep)
        state.job = self.reader.start(plan_)
        return state

    def finish_fetch(self, load, state):
        """Waits for a batch's fetch; returns the local error (or None)."""
        job = state.job
        if job is None:
            return None
        try:
            job.wait()
            for key, cpu in state.cpu.items():
                state.bufs[key].view(-1).copy_(cpu)
        except BaseException as e:  # KeyboardInterrupt too: the others must not hang
            load.fetch_context = state.context
            return e
        finally:
            state.job = None
        return None

    def cancel(self, state):
        """Cancels a batch's fetch still in flight, and waits for it to stop."""
        if state is not None and state.job is not None:
            state.job.cancel()
            try:
                state.job.wait()
            except BaseException:
                pass
            state.job = None

    def run(self, load):
        """Fetches and exchanges every batch of ``load`` (``start``'s), the next batch's
        fetch running during this one's exchange."""
        exchange = _Exchange(self.group, self.staging, load)
        n = len(load.batches)
        pending = None
        try:
            nxt: Any = self._guarded_prepare(load, 0) if n else None
            clock = time.perf_counter
            for k in range(n):
                cur, exc = nxt
                t0 = clock()
                if exc is None:
                    exc = self.finish_fetch(load, cur)
                t1 = clock()
                nxt = None
                if exc is None and k + 1 < n:
                    nxt = self._guarded_prepare(load, k + 1)
                    pending = nxt[0]
                t2 = clock()
                self._collective(exchange.agree, exc, f"the fetch of batch {k + 1} of {n}")
                t3 = clock()
                self._collective(exchange.exchange, cur)
                t4 = clock()
                self.stats["fetch_wait_s"] += t1 - t0
                self.stats["agree_s"] += t3 - t2
                self.stats["exchange_s"] += t4 - t3
        except BaseException:
            self.cancel(pending)
            raise
        finally:
            exc = nxt = None

    def _guarded_prepare(self, load, k):
        """(state, None) from ``prepare(load, k)``, or an empty state and the error it raised."""
        try:
            return self.prepare(load, k), None
        except Exception as e:
            load.started_batches = max(load.started_batches, k + 1)
            load.fetch_context = f"planning batch {k + 1} of {len(load.batches)}"
            return _BatchState(k), e

    def close(self):
        """Closes the reader."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def _digest(shards, tensors):
    """What the ranks compare to know they opened the same checkpoint: a hash of its
    headers (the reader's ``shards``, ShardInfo records, and ``tensors``, _Tensor records).
    An hf:// shard's spec counts too: it names the commit the rank read (a branch that
    moved between the ranks' opens is refused, never mixed). Other paths and URLs may
    differ between ranks (a rank's own mirror or presigned URL). Each shard counts as a
    plain tuple: the digest does not depend on how a record prints."""
    infos = [t.info for t in tensors]
    kept = [(s.spec, s.size, s.data_start) if s.spec.lower().startswith("hf://") else (s.size, s.data_start)
            for s in shards]
    return hashlib.sha256(repr((infos, kept)).encode()).hexdigest()


def _bytes_of(t):
    """A flat uint8 view of a contiguous tensor's memory, whatever its dtype."""
    n = t.numel() * t.element_size()
    out = torch.empty(0, dtype=torch.uint8, device=t.device)
    if n:
        out.set_(t.untyped_storage(), t.storage_offset() * t.element_size(), (n,), (1,))
    return out


def _execute(filename, group, *, memory_limit, stats, options, local, finish):
    """Runs one load: ``local(group, reader, tensors, by_name) -> _Destinations`` on this
    rank after the open (``group`` a _Group: ``me``, ``world``, ``comm``; ``tensors`` the
    checkpoint's _Tensor records in data order, ``by_name`` {name: _Tensor}), ``finish()``
    after the last exchange (its result is returned)."""
    run = _Run(filename, group, memory_limit=memory_limit, stats=stats)
    try:
        load = run.start(options, local)
        run.run(load)
        return finish()
    finally:
        run.close()

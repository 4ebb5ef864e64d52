"""The run stage of ``ringsafe.distributed``: one cooperative load, executed.

``_Run`` opens the checkpoint, has the front end work out this rank's needs and
destinations, shares them with the other ranks, plans, then per batch fetches
this rank's share with the engine (the next batch's fetch in flight during this
one's exchange), agrees on errors and exchanges. ``_execute`` drives it for the
front end's ``load_file``, ``read_into`` and ``load_model``.
"""

import hashlib
import time
from typing import Any

import torch

from ._errors import error
from ._source import open_reader
from ._ringsafe import http_connections, plan_requests_at
from ._dist_plan import _BCASTP, _SKIP, _Tensor, _file_bytes, _slices, plan
from ._dist_exchange import _BatchState, _Exchange, _describe, _rebuild


# ---------------------------------------------------------------- the run

class _Run(_Exchange):
    """One cooperative load on this rank: ``start`` (open, needs, plan), ``run`` (fetch
    and exchange every batch), ``close``; the destinations are in ``dests``."""

    def __init__(self, group, memory_limit, stats):
        stats = stats if stats is not None else {}
        super().__init__(group, stats)
        self.memory_limit = memory_limit
        self.batch_bytes: Any = None  # a batch's share per rank (_check_limit)
        self.stats.update(fetched_bytes=0, fetch_requests=0, sent_bytes=0, received_bytes=0, staging_peak=0,
                          batches=0, broadcasts=0, all_to_alls=0, memory_limit=memory_limit,
                          rank=self.me, world_size=self.world, fetch_wait_s=0.0, agree_s=0.0, exchange_s=0.0)
        self.reader: Any = None
        # What start() finds out.
        self.shards = []           # reader.shards(): (spec, size, data_start) each
        self.tensors = []          # _Tensor of every checkpoint tensor, in data order
        self.by_name = {}          # {name: _Tensor}
        self.dests = {}            # {name: tensor}: this rank's destinations, from the front end
        self.needs = []            # per rank, {name: element box}
        self.dest_bytes = {}       # {name: uint8 view of this rank's destination, shaped as its byte box}
        self.caller_owned = set()  # destinations the caller gave (partly written on an error)
        self.first_batch, self.last_batch = {}, {}  # {name: first / last batch touching it}
        self.started_batches = 0   # batches whose fetch began

    # -- phases ----------------------------------------------------------------
    def _check_limit(self):
        """Validates ``memory_limit`` and derives ``batch_bytes``, a batch's share per rank."""
        limit = self.memory_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"memory_limit must be a positive int (bytes), got {limit!r}")
        # Live staging, worst case per rank: two batches' fetches (one being exchanged, the
        # next in flight) + all_to_all send and receive buffers of (world - 1) pieces each.
        parts = 2 * self.world + (2 if self.comm.type != "cpu" else 0)
        self.batch_bytes = limit // parts
        if self.batch_bytes < 4096:
            raise ValueError(f"memory_limit={limit} is too small for {self.world} ranks (at least {parts * 4096} "
                             f"bytes)")

    def start(self, filename, options, local):
        """Opens, works out this rank's needs (``local(reader, tensors) -> (needs, dests)``),
        exchanges needs and errors (every rank raises any rank's), and plans."""
        self.spec = str(filename)
        payload, exc = None, None
        try:
            payload = self._open(filename, options, local)
        except Exception as e:
            exc = e
        gathered = self._gather("exchanging the ranks' needs", (payload, None if exc is None else _describe(exc)))
        self._agree_on_needs(gathered, exc)
        self.needs = [g[0][1] for g in gathered]
        if not all(g[0][2] for g in gathered):
            self.image = None
        self.stats["layout"] = "image" if self.image is not None else "packed"
        self.batches = plan(self.tensors, self.needs, world=self.world, batch_bytes=self.batch_bytes,
                            image=self.image is not None)
        self.stats["batches"] = len(self.batches)
        # The first and last batch touching each of this rank's destinations (to name incomplete ones).
        for k, b in enumerate(self.batches):
            for u in b.units:
                if self.me in u.inters:
                    self.first_batch.setdefault(u.t.info.name, k)
                    self.last_batch[u.t.info.name] = k
        for name, box in self.needs[self.me].items():
            t = self.by_name[name]
            if t.nbytes(box):
                self.dest_bytes[name] = _bytes_of(self.dests[name]).view([e - s for s, e in t.byte_box(box)])

    def _open(self, filename, options, local):
        """Opens the checkpoint and asks the front end for this rank's needs and
        destinations; returns what the rank tells the others: (digest of the
        headers, needs, whether its destinations are images of the data)."""
        self._check_limit()
        if options.get("http_chunk") is None:
            # Each batch's Range requests spread over the connections (two rounds of them).
            per = self.batch_bytes // (2 * http_connections(options.get("connections")))
            options = dict(options, http_chunk=max(256 << 10, min(8 << 20, per >> 16 << 16)))
        self.reader = open_reader(filename, options)
        infos = self.reader.tensors()
        self.shards = self.reader.shards()
        self.tensors = [_Tensor(info, i) for i, info in enumerate(infos)]
        self.by_name = {t.info.name: t for t in self.tensors}
        needs, self.dests = local(self.reader, self.by_name)
        # An hf:// shard's spec counts too: it names the commit the rank read (a branch that
        # moved between the ranks' opens is refused, never mixed). Other paths and URLs may
        # differ between ranks (a rank's own mirror or presigned URL).
        shards = [s if s[0].lower().startswith("hf://") else s[1:] for s in self.shards]
        digest = hashlib.sha256(repr((infos, shards)).encode()).hexdigest()
        return digest, needs, self.image is not None

    def _agree_on_needs(self, gathered, exc):
        """Raises on every rank when any rank failed to open (that rank's error) or
        the ranks opened different checkpoints."""
        failed = [r for r in range(self.world) if gathered[r][1] is not None]
        if failed:
            src = failed[0]
            others = f" (ranks {', '.join(map(str, failed))} failed)" if len(failed) > 1 else ""
            e = _rebuild(gathered[src][1], f"rank {src} of {self.world}{others}: {gathered[src][1][3]}")
            e.rank = src
            self.close()
            if exc is not None:
                raise e from exc
            raise e
        digests = [g[0][0] for g in gathered]
        if len(set(digests)) > 1:
            odd = [r for r in range(self.world) if digests[r] != digests[0]]
            self.close()
            raise error("DistributedError", f"the ranks opened different checkpoints: the header (or the hf:// "
                                            f"commit) that ranks {', '.join(map(str, odd))} "
                                            f"of {self.world} read differs from rank 0's")

    def incomplete(self):
        """Caller-owned destinations possibly written but not complete: touched by a started
        batch and not finished by an exchanged one."""
        return {n for n in self.caller_owned if n in self.last_batch
                and self.first_batch[n] < self.started_batches and self.last_batch[n] >= self.done_batches}

    def dest_view(self, u, box):
        """This rank's destination bytes of ``box`` of the unit's tensor."""
        t = u.t
        need = self.needs[self.me][t.info.name]
        return self.dest_bytes[t.info.name][_slices(t.byte_box(box), t.byte_box(need))]

    def _file_range(self, u):
        """(file, first byte, end byte) the unit's bytes span in its file."""
        shard, first, end = _file_bytes(u)
        spec, _, data_start = self.shards[shard]
        return spec, data_start + first, data_start + end

    def prepare(self, k):
        """Buffers for this rank's units of batch k; starts their fetch. Returns the batch state."""
        batch = self.batches[k]
        mine = [u for u in batch.units if u.owner == self.me and u.mode != _SKIP]
        state = _BatchState(k)
        self.started_batches = max(self.started_batches, k + 1)
        if not mine:
            return state
        packed_size = batch.packed_size[self.me]
        if packed_size:
            state.packed = self.stage(packed_size)
            state.staged += packed_size
        off = 0
        reqs, keep = [], []
        for u in mine:
            shape = [e - s for s, e in u.t.byte_box(u.box)]
            if u.mode == _BCASTP:
                buf = state.packed[off:off + u.nbytes].view(shape)
                off += u.nbytes
            else:
                buf = None
                if u.inters.get(self.me) == u.box:
                    v = self.dest_view(u, u.box)
                    if v.is_contiguous():
                        buf = v
                if buf is None:
                    buf = self.stage(u.nbytes).view(shape)
                    state.staged += u.nbytes
            state.bufs[u.key] = buf
            target = buf
            if self.comm.type != "cpu":
                target = self.stage(u.nbytes, torch.device("cpu"))
                state.staged += u.nbytes
                state.cpu[u.key] = target
            reqs.append((u.t.info.name, u.t.engine_box(u.box), target.data_ptr(), u.nbytes))
            keep.append(target)
        ranges: dict[str, tuple[int, int]] = {}
        for u in mine:
            spec, a, b = self._file_range(u)
            lo, hi = ranges.get(spec, (a, b))
            ranges[spec] = (min(lo, a), max(hi, b))
        state.context = "; ".join(f"fetching bytes {a}-{b - 1} of {spec}" for spec, (a, b) in ranges.items())
        state.context += f" (batch {k + 1} of {len(self.batches)})"
        self.stats["fetched_bytes"] += sum(u.nbytes for u in mine)
        self.stats["fetch_requests"] += len(reqs)
        plan_ = plan_requests_at(self.reader, reqs, keep)
        state.job = self.reader.start(plan_)
        return state

    def finish_fetch(self, state):
        """Waits for a batch's fetch; returns the local error (or None)."""
        job = state.job
        if job is None:
            return None
        try:
            job.wait()
            for key, cpu in state.cpu.items():
                state.bufs[key].view(-1).copy_(cpu)
        except BaseException as e:  # KeyboardInterrupt too: the others must not hang
            self.fetch_context = state.context
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

    def run(self):
        """Fetches and exchanges every batch, the next batch's fetch running during
        this one's exchange."""
        pending = None
        try:
            nxt: Any = self._guarded_prepare(0) if self.batches else None
            clock = time.perf_counter
            for k in range(len(self.batches)):
                cur, exc = nxt
                t0 = clock()
                if exc is None:
                    exc = self.finish_fetch(cur)
                t1 = clock()
                nxt = None
                if exc is None and k + 1 < len(self.batches):
                    nxt = self._guarded_prepare(k + 1)
                    pending = nxt[0]
                t2 = clock()
                self.agree(exc, f"the fetch of batch {k + 1} of {len(self.batches)}")
                t3 = clock()
                self.exchange(cur)
                t4 = clock()
                self.stats["fetch_wait_s"] += t1 - t0
                self.stats["agree_s"] += t3 - t2
                self.stats["exchange_s"] += t4 - t3
        except BaseException:
            self.cancel(pending)
            raise

    def _guarded_prepare(self, k):
        """(state, None) from ``prepare(k)``, or an empty state and the error it raised."""
        try:
            return self.prepare(k), None
        except Exception as e:
            self.started_batches = max(self.started_batches, k + 1)
            self.fetch_context = f"planning batch {k + 1} of {len(self.batches)}"
            return _BatchState(k), e

    def close(self):
        """Closes the reader."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def _bytes_of(t):
    """A flat uint8 view of a contiguous tensor's memory, whatever its dtype."""
    n = t.numel() * t.element_size()
    out = torch.empty(0, dtype=torch.uint8, device=t.device)
    if n:
        out.set_(t.untyped_storage(), t.storage_offset() * t.element_size(), (n,), (1,))
    return out


def _execute(filename, group, *, memory_limit, stats, options, local, finish):
    """Runs one load: ``local(run, reader, tensors) -> (needs, dests)`` on this rank after
    the open, ``finish(run)`` after the last exchange (its result is returned)."""
    run = _Run(group, memory_limit, stats)
    try:
        run.start(filename, options, lambda reader, by_name: local(run, reader, by_name))
        run.run()
        return finish(run)
    finally:
        run.close()


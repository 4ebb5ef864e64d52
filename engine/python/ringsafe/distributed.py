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
"""

import hashlib
import time

import torch

from ._dtypes import error
from ._source import ALIGNMENT, open_reader
from ._ringsafe import Arena, http_connections
from ._selection import resolve
from ._torch_adapter import ADAPTER
from ._dist_plan import (_BCASTP, _SKIP, _Tensor, _file_bytes, _image_layout, _needs, _slices, _torch_shape,
                         plan)
from ._dist_exchange import _Exchange, _describe, _rebuild
from ._dist_plan import _BALANCE_SLACK, _flat_interval  # noqa: F401  (the planner's tests import them from here)

__all__ = ["load_file", "read_into", "load_model", "DEFAULT_MEMORY_LIMIT"]

DEFAULT_MEMORY_LIMIT = 1 << 30


# ---------------------------------------------------------------- the run

class _Run(_Exchange):
    def __init__(self, group, memory_limit, stats):
        super().__init__(group)
        self.memory_limit = memory_limit
        self.batch_bytes = None
        self.stats = stats if stats is not None else {}
        self.stats.update(fetched_bytes=0, fetch_requests=0, sent_bytes=0, received_bytes=0, staging_peak=0,
                          batches=0, broadcasts=0, all_to_alls=0, memory_limit=memory_limit,
                          rank=self.me, world_size=self.world, fetch_wait_s=0.0, agree_s=0.0, exchange_s=0.0)
        self.live = 0
        self.reader = None
        self.image = None        # {name: offset} when this rank's destinations are images of the data
        self.image_bytes = None

    # -- staging ---------------------------------------------------------------
    def stage(self, n, device=None):
        self.live += n
        self.stats["staging_peak"] = max(self.stats["staging_peak"], self.live)
        return torch.empty(n, dtype=torch.uint8, device=device or self.comm)

    def unstage(self, n):
        self.live -= n

    # -- phases ----------------------------------------------------------------
    def _check_limit(self):
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
        self.fetch_context = ""
        self.caller_owned = set()
        payload, exc = None, None
        try:
            self._check_limit()
            if options.get("http_chunk") is None:
                # Each batch's Range requests spread over the connections (two rounds of them).
                per = self.batch_bytes // (2 * http_connections(options.get("connections")))
                options = dict(options, http_chunk=max(256 << 10, min(8 << 20, per >> 16 << 16)))
            self.reader = open_reader(filename, options)
            infos = self.reader.tensors()
            self.shards = self.reader.shards()
            self.tensors = [_Tensor(info, i) for i, info in enumerate(infos)]
            self.by_name = {t.name: t for t in self.tensors}
            needs, self.dests = local(self.reader, self.by_name)
            digest = hashlib.sha256(repr((infos, [s[1:] for s in self.shards])).encode()).hexdigest()
            payload = (digest, needs, self.image is not None)
        except Exception as e:
            exc = e
        gathered = self._gather("exchanging the ranks' needs", (payload, None if exc is None else _describe(exc)))
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
            raise error("DistributedError", f"the ranks opened different checkpoints: the header that ranks "
                                            f"{', '.join(map(str, odd))} of {self.world} read differs from rank 0's")
        self.needs = [g[0][1] for g in gathered]
        if not all(g[0][2] for g in gathered):
            self.image = None
        self.stats["layout"] = "image" if self.image is not None else "packed"
        self.batches = plan(self.tensors, self.needs, self.world, self.batch_bytes, self.image is not None)
        self.stats["batches"] = len(self.batches)
        self.done_batches = 0
        self.started_batches = 0
        # The last batch touching each of this rank's destinations (to name incomplete ones).
        self.last_batch, self.first_batch = {}, {}
        for k, b in enumerate(self.batches):
            for u in b.units:
                if self.me in u.inters:
                    self.first_batch.setdefault(u.t.name, k)
                    self.last_batch[u.t.name] = k
        mine = self.needs[self.me]
        self.dest_bytes = {}
        for name, box in mine.items():
            t = self.by_name[name]
            if t.nbytes(box) == 0:
                continue
            d = self.dests[name]
            raw = _bytes_of(d)
            self.dest_bytes[name] = raw.view([e - s for s, e in t.byte_box(box)])

    def incomplete(self):
        """Caller-owned destinations possibly written but not complete: touched by a started
        batch and not finished by an exchanged one."""
        return {n for n in self.caller_owned if n in self.last_batch
                and self.first_batch[n] < self.started_batches and self.last_batch[n] >= self.done_batches}

    def dest_view(self, u, box):
        t = u.t
        need = self.needs[self.me][t.name]
        return self.dest_bytes[t.name][_slices(t.byte_box(box), t.byte_box(need))]

    def _file_range(self, u):
        """(file, first byte, end byte) the unit's bytes span in its file."""
        shard, first, end = _file_bytes(u)
        spec, _, data_start = self.shards[shard]
        return spec, data_start + first, data_start + end

    def prepare(self, k):
        """Buffers for this rank's units of batch k; starts their fetch. Returns the batch state."""
        batch = self.batches[k]
        mine = [u for u in batch.units if u.owner == self.me and u.mode != _SKIP]
        state = {"k": k, "bufs": {}, "packed": None, "staged": 0, "job": None, "cpu": {}}
        self.started_batches = max(self.started_batches, k + 1)
        if not mine:
            return state
        packed_size = batch.packed_size[self.me]
        if packed_size:
            state["packed"] = self.stage(packed_size)
            state["staged"] += packed_size
        off = 0
        reqs, keep = [], []
        for u in mine:
            shape = [e - s for s, e in u.t.byte_box(u.box)]
            if u.mode == _BCASTP:
                buf = state["packed"][off:off + u.nbytes].view(shape)
                off += u.nbytes
            else:
                buf = None
                if u.inters.get(self.me) == u.box:
                    v = self.dest_view(u, u.box)
                    if v.is_contiguous():
                        buf = v
                if buf is None:
                    buf = self.stage(u.nbytes).view(shape)
                    state["staged"] += u.nbytes
            state["bufs"][u.key] = buf
            target = buf
            if self.comm.type != "cpu":
                target = self.stage(u.nbytes, torch.device("cpu"))
                state["staged"] += u.nbytes
                state["cpu"][u.key] = target
            reqs.append((u.t.name, u.t.engine_box(u.box), target.data_ptr(), u.nbytes))
            keep.append(target)
        ranges = {}
        for u in mine:
            spec, a, b = self._file_range(u)
            lo, hi = ranges.get(spec, (a, b))
            ranges[spec] = (min(lo, a), max(hi, b))
        state["context"] = "; ".join(f"fetching bytes {a}-{b - 1} of {spec}" for spec, (a, b) in ranges.items())
        state["context"] += f" (batch {k + 1} of {len(self.batches)})"
        self.stats["fetched_bytes"] += sum(u.nbytes for u in mine)
        self.stats["fetch_requests"] += len(reqs)
        plan_ = self.reader.plan_requests(reqs, keep)
        state["job"] = self.reader.start(plan_)
        return state

    def finish_fetch(self, state):
        """Waits for a batch's fetch; returns the local error (or None)."""
        job = state["job"]
        if job is None:
            return None
        try:
            job.wait()
            for key, cpu in state["cpu"].items():
                state["bufs"][key].view(-1).copy_(cpu)
        except BaseException as e:  # KeyboardInterrupt too: the others must not hang
            self.fetch_context = state.get("context", "")
            return e
        finally:
            state["job"] = None
        return None

    def cancel(self, state):
        if state is not None and state["job"] is not None:
            state["job"].cancel()
            try:
                state["job"].wait()
            except BaseException:
                pass
            state["job"] = None

    def run(self):
        """Fetches and exchanges every batch, the next batch's fetch running during
        this one's exchange."""
        pending = None
        try:
            nxt = self._guarded_prepare(0) if self.batches else None
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
        try:
            return self.prepare(k), None
        except Exception as e:
            self.started_batches = max(self.started_batches, k + 1)
            self.fetch_context = f"planning batch {k + 1} of {len(self.batches)}"
            return {"k": k, "job": None, "bufs": {}, "packed": None, "staged": 0, "cpu": {}}, e

    def close(self):
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



def _execute(filename, group, memory_limit, stats, options, local, finish):
    run = _Run(group, memory_limit, stats)
    try:
        run.start(filename, options, lambda reader, by_name: local(run, reader, by_name))
        run.run()
        return finish(run)
    finally:
        run.close()


# ---------------------------------------------------------------- public API

def load_file(filename, group=None, *, device="cpu", select=None, shard=None, memory_limit=DEFAULT_MEMORY_LIMIT,
              stats=None, **options):
    """Loads a checkpoint on every rank of ``group`` (default: the world), each
    byte fetched from the source by one rank only. Returns {name: tensor} on
    every rank, as ``ringsafe.torch.load_file`` would alone.

    ``filename``: a path, http(s):// or s3:// URL, or ``*.index.json`` (each rank
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

    def local(run, reader, by_name):
        dev.append(ADAPTER.check_device(device))
        names = resolve(reader, [t.name for t in run.tensors], select)
        needs = _needs(reader, by_name, names, shard, run.me, run.world)
        items, size = [], 0
        image = _image_layout(run.tensors, needs)
        for n in names:
            t = by_name[n]
            nbytes = t.nbytes(needs[n])
            if image is not None:
                off = image[0][n]
                size = image[1]
            else:
                size = -(-size // ALIGNMENT) * ALIGNMENT
                off = size
                size += nbytes
            items.append((n, off, t.dtype, [e - s for s, e in needs[n]] if t.shape else [], nbytes))
        if run.comm.type == "cpu":
            arena = Arena(size, prefault=False) if size else b""
            views = ADAPTER.views(arena, items)
            raw = torch.frombuffer(arena, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
        else:
            raw = torch.empty(size, dtype=torch.uint8, device=run.comm)
            views = {}
            for n, off, dtype, shape, nbytes in items:
                tt, s = ADAPTER._type(dtype, shape, n)
                views[n] = raw[off:off + nbytes].view(tt).view(s) if nbytes else torch.empty(s, dtype=tt,
                                                                                              device=run.comm)
        if image is not None:
            run.image, run.image_bytes = image[0], raw
        return needs, views

    def finish(run):
        return {n: (v if v.device == dev[0] else v.to(dev[0])) for n, v in sorted(run.dests.items())}

    return _execute(filename, group, memory_limit, stats, options, local, finish)


def read_into(filename, tensors, group=None, *, shard=None, memory_limit=DEFAULT_MEMORY_LIMIT, stats=None,
              **options):
    """Fills this rank's tensors {name: tensor} in place, cooperatively (see
    ``load_file``). Each tensor holds this rank's box of the checkpoint tensor
    (``shard=``; the whole tensor by default): its dtype and shape are checked
    on every rank before any byte is fetched. On an error, the exception's
    ``incomplete`` lists this rank's tensors that may be partly written; the
    others are untouched or complete."""
    copies = {}

    def local(run, reader, by_name):
        if not isinstance(tensors, dict):
            raise TypeError(f"read_into takes a dict {{name: tensor}}, got {type(tensors).__name__}")
        names = list(tensors)
        reader.select(names)
        needs = _needs(reader, by_name, names, shard, run.me, run.world)
        dests = {}
        for n in names:
            t, dst = by_name[n], tensors[n]
            if not isinstance(dst, torch.Tensor):
                raise TypeError(f"read_into: tensor '{n}' is a {type(dst).__name__}, not a torch.Tensor")
            tt, shape = _torch_shape(t, needs[n])
            if dst.dtype != tt or list(dst.shape) != shape:
                raise error("InvalidArgument", f"tensor '{n}': this rank's part is {t.dtype} {shape}, the "
                                               f"destination is {dst.dtype} {list(dst.shape)}")
            if dst.device == run.comm and dst.is_contiguous():
                dests[n] = dst
                run.caller_owned.add(n)
            else:
                dests[n] = copies[n] = torch.empty(shape, dtype=tt, device=run.comm)
        return needs, dests

    def finish(run):
        with torch.no_grad():
            for n, c in copies.items():
                tensors[n].copy_(c)
        return tensors

    return _execute(filename, group, memory_limit, stats, options, local, finish)


def load_model(model, filename, group=None, *, strict=True, shard=None, memory_limit=DEFAULT_MEMORY_LIMIT,
               stats=None, **options):
    """Loads a checkpoint into this rank's model (its parameters and buffers,
    in place), cooperatively (see ``load_file``). A rank's model may hold only
    some of the checkpoint's tensors (pipeline stages) and, with ``shard=``,
    parts of them (tensor parallelism: each parameter's shape must be its
    box's). Returns (missing, unexpected) as ``ringsafe.torch.load_model``;
    strict=True raises RuntimeError on every rank, before any byte is fetched,
    when any rank's model does not match."""
    from ._model import _error_text
    from ._shared import _remove_duplicate_names
    copies = {}
    result = {}

    def local(run, reader, by_name):
        state = model.state_dict()
        aliases = _remove_duplicate_names(state, preferred_names=by_name.keys())
        dropped = {n for names in aliases.values() for n in names}
        missing = {k for k in state if k not in by_name}
        unexpected = [k for k in by_name if k not in state]
        for n in dropped:
            if n in missing:
                missing.discard(n)
            else:
                unexpected.append(n)
        if strict and (missing or unexpected):
            raise RuntimeError(_error_text(model, missing, unexpected))
        result["value"] = (missing, unexpected)
        names = [t.name for t in run.tensors if t.name in state and t.name not in dropped]
        needs = _needs(reader, by_name, names, shard, run.me, run.world)
        dests = {}
        for n in names:
            t, p = by_name[n], state[n]
            tt, shape = _torch_shape(t, needs[n])
            if list(p.shape) != shape:
                raise RuntimeError(_error_text(model, (), ()) + f"\n    size mismatch for {n}: copying a param "
                                   f"with shape {torch.Size(shape)} from checkpoint (this rank's part), the shape "
                                   f"in current model is {p.shape}.")
            if p.device == run.comm and p.is_contiguous() and p.dtype == tt:
                dests[n] = p.detach()
                run.caller_owned.add(n)
            else:
                dests[n] = copies[n] = torch.empty(shape, dtype=tt, device=run.comm)
        result["state"] = state
        return needs, dests

    def finish(run):
        state = result["state"]
        with torch.no_grad():
            for n, c in copies.items():
                state[n].copy_(c)
        return result["value"]

    return _execute(filename, group, memory_limit, stats, options, local, finish)

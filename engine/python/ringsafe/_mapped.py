"""backend="mmap" for local files and local sharded indexes: every tensor is a
zero-copy view of a private (copy-on-write) mapping of its shard, as the
reference's are, with the difference that the bytes a call hands out are made
resident before it returns, in parallel (the kernel's readahead queued for
what is not cached yet), and that an open handle reads ahead in file order."""

import threading

from ._described import FileRange, RangeCopy
from ._dtypes import BITS
from ._errors import error
from ._engine_source import EngineSource
from ._memory import ViewItem
from ._ringsafe import MappedFile

READ_AHEAD_STEP = 32 << 20  # bytes queued per readahead request
# A tensor smaller than this is handed out unpopulated (its first access faults
# it in, as the reference's do): populating costs more than it saves below it.
POPULATE_MIN = 1 << 20


def checked_mapping(reader, shard, m=None):
    """A MappedFile of local shard ``shard`` of ``reader`` (``m`` when given,
    else mapped now), checked against what the reader parsed: ObjectChanged
    when another file is at its path now, or it was rewritten in place (size
    or modification time), or its header differs."""
    info = reader.shards()[shard]  # what the reader parsed
    if m is None:
        m = MappedFile(reader.shard_file(shard))  # its local file (an hf:// spec's: the Hub cache's)
    then, now = info.stat, m.stat
    if not now.same_file(then):
        raise error("ObjectChanged", f"{info.spec} was replaced between reading its header and mapping it "
                                     f"(another file is at that path now)")
    if now != then:
        raise error("ObjectChanged", f"{info.spec} was rewritten in place between reading its header and mapping "
                                     f"it ({then.size} bytes then, {now.size} now; modified at {then.mtime_ns} ns "
                                     f"then, {now.mtime_ns} now)")
    # The header as mapped: resident first (a file cut short since raises
    # Truncated, not SIGBUS), then compared with the one the reader parsed.
    m.populate([FileRange(0, info.data_start)], 1)
    if not reader.header_matches(shard, m):
        raise error("ObjectChanged", f"{info.spec}'s header changed between reading it and mapping the file")
    return m


class MappedSource(EngineSource):
    def __init__(self, reader, threads=None):
        super().__init__(reader)
        self._threads = threads or 0
        self._shards = reader.shards()  # ShardInfo records
        self._stop = threading.Event()
        self._ahead = None  # names to read ahead once the caller walks them (read_ahead)
        # Every shard is mapped now, right after its header was read, and checked
        # against it, so a file replaced later (atomic rename) is never mixed in.
        self._maps = [self._map(i) for i in range(len(self._shards))]

    def _map(self, shard):
        return checked_mapping(self.reader, shard)

    def mapping(self, shard):
        """The shard's MappedFile."""
        return self._maps[shard]

    def _ranges(self, names):
        """{shard: [FileRange]} of the named tensors' bytes."""
        out: dict[int, list[FileRange]] = {}
        for n in names:
            info = self.by_name[n]
            if info.end > info.begin:
                base = self._shards[info.shard].data_start
                out.setdefault(info.shard, []).append(FileRange(base + info.begin, info.nbytes))
        return out

    def _populate(self, names, progress=None):
        per_shard = self._ranges(names)
        total = sum(r.length for rs in per_shard.values() for r in rs)
        before = 0
        for shard, ranges in per_shard.items():
            cb = None
            if progress is not None:
                cb = (lambda base: lambda done, _: progress(base + done, total))(before)
            self.mapping(shard).populate(ranges, self._threads, cb)
            before += sum(r.length for r in ranges)
        if progress is not None and total == 0:
            progress(0, 0)

    def _view(self, adapter, info):
        if info.end == info.begin:
            return adapter.views(None, [ViewItem(info.name, 0, info.dtype, info.shape, 0)])[info.name]
        base = self._shards[info.shard].data_start
        item = ViewItem(info.name, base + info.begin, info.dtype, info.shape, info.nbytes)
        return adapter.views(self.mapping(info.shard), [item])[info.name]

    def load(self, adapter, names, progress):
        self._populate(names, progress)
        return {n: self._view(adapter, self.by_name[n]) for n in names}

    def read_ahead_from(self, name):
        """The first whole tensor asked for: from it on, the rest of the
        handle's keys are read ahead in file order (once per source)."""
        if self._ahead is not None:
            names, self._ahead = self._ahead, None
            if name in names:
                self._start_read_ahead(names[names.index(name):])

    def one(self, adapter, name):
        info = self.by_name[name]
        self.read_ahead_from(name)
        if info.nbytes >= POPULATE_MIN:
            self._populate([name])
        return self._view(adapter, info)

    def box(self, adapter, info, box, box_shape):
        if info.dtype == "F4" or not all(box_shape):  # packed values, or nothing to read
            return super().box(adapter, info, box, box_shape)
        shape = info.shape
        # The byte span from the box's first element to its last (row-major).
        first = last = 0
        stride = 1
        for (start, stop), n in zip(reversed(box), reversed(shape)):
            first += start * stride
            last += (stop - 1) * stride
            stride *= n
        bits = BITS[info.dtype]
        begin = first * bits // 8
        end = -(-(last + 1) * bits // 8)
        if end - begin >= POPULATE_MIN:
            base = self._shards[info.shard].data_start + info.begin
            self.mapping(info.shard).populate([FileRange(base + begin, end - begin)], self._threads)
        whole = self._view(adapter, info)
        return whole[tuple(slice(a, b) for a, b in box)]

    def read_ahead(self, names):
        """Arms read-ahead: the first whole tensor handed out (get_tensor) starts
        reading the named tensors from it on into the page cache, in file order,
        on a background thread, when some are not cached yet; close() stops it.
        get_tensor() loops then run at the whole-file rate, while a handle used
        for slices only (tensor-parallel loads) reads just what it slices."""
        self._ahead = list(names)

    def _start_read_ahead(self, names):
        ranges = self._ranges(names)
        work = []
        for shard, rs in sorted(ranges.items()):
            m = self.mapping(shard)
            lo = min(r.offset for r in rs)
            hi = max(r.offset + r.length for r in rs)
            # Sampled (a full mincore of a large file costs as much as reading ahead).
            samples = [lo + (hi - lo - 1) * k // 15 for k in range(16)]
            if any(m.resident(o, 1) == 0 for o in samples):
                work.append((m, sorted(rs, key=lambda r: r.offset)))
        if not work:
            return

        def run():
            for m, rs in work:
                for r in rs:
                    end = r.offset + r.length
                    for o in range(r.offset, end, READ_AHEAD_STEP):
                        if self._stop.is_set():
                            return
                        m.will_need(o, min(READ_AHEAD_STEP, end - o))

        # Not a daemon: a daemon thread inside will_need (GIL released) when the
        # interpreter finalizes is ended by a forced unwind through the binding,
        # which aborts the process ("terminate called without an active
        # exception"). The interpreter waits for this one at exit instead; it
        # stops at the next step once the handle is closed.
        thread = threading.Thread(target=run, name="ringsafe-read-ahead")
        try:
            thread.start()
        except RuntimeError:  # the system refuses a thread: no read-ahead (each get_tensor reads its own)
            return
        self._ahead_thread = thread

    def close(self):
        self._stop.set()
        ahead = getattr(self, "_ahead_thread", None)
        if ahead is not None and ahead is not threading.current_thread():
            ahead.join()
        super().close()


def copy_into(maps, shards, items, *, threads=None, progress=None):
    """Copies whole tensors out of the mappings ``maps`` ({shard: MappedFile},
    _caller_memory.mapped_when_hot) into caller memory, on every core with the GIL
    released: items are (info, buffer), info a TensorInfo, buffer
    a writable C-contiguous buffer of the tensor's bytes; shards reader.shards() (ShardInfo records)."""
    per_shard: dict[int, list[RangeCopy]] = {}
    for info, buf in items:
        if info.end > info.begin:
            copy = RangeCopy(shards[info.shard].data_start + info.begin, info.nbytes, buf)
            per_shard.setdefault(info.shard, []).append(copy)
    total = sum(c.length for cs in per_shard.values() for c in cs)
    before = 0
    for shard, copies in sorted(per_shard.items()):
        cb = None
        if progress is not None:
            cb = (lambda base: lambda done, _: progress(base + done, total))(before)
        maps[shard].copy_to(copies, threads or 0, cb)
        before += sum(c.length for c in copies)
    if progress is not None and total == 0:
        progress(0, 0)


def mapped_views(adapter, maps, shards, infos, *, threads=None):
    """{name: tensor} zero-copy views of the tensors ``infos`` in the mappings
    ``maps``, made resident in parallel first (for copies that convert)."""
    ranges: dict[int, list[FileRange]] = {}
    for info in infos:
        if info.end > info.begin:
            ranges.setdefault(info.shard, []).append(FileRange(shards[info.shard].data_start + info.begin,
                                                               info.nbytes))
    for shard, rs in ranges.items():
        maps[shard].populate(rs, threads or 0)
    out = {}
    for info in infos:
        if info.end == info.begin:
            out.update(adapter.views(None, [ViewItem(info.name, 0, info.dtype, info.shape, 0)]))
        else:
            item = ViewItem(info.name, shards[info.shard].data_start + info.begin, info.dtype, info.shape, info.nbytes)
            out.update(adapter.views(maps[info.shard], [item]))
    return out

"""Loading for both frameworks: whole checkpoints into one arena, bytes, the
caller's own tensors, and the bounded-memory streaming iterator."""

import os
from typing import TYPE_CHECKING, Any

from . import _device
from ._described import MemorySpan
from ._errors import error
from ._progress import progress_callback
from ._ringsafe import Reader, plan_tensors_at
from ._selection import resolve
from ._serialize import parse_checked_bytes
from ._memory import aligned, new_packed_arena, packed_items
from ._mapped import copy_into
from . import _caller_memory
from ._source import open_reader, open_source

if TYPE_CHECKING:
    from ._typing import ReaderOptions


def load_file(adapter, filename, *, device, select, progress, backend, options):
    device = adapter.check_device(device)
    if _device.applies(adapter, device) and isinstance(filename, (str, bytes, os.PathLike)):
        return _load_to_device(adapter, filename, device=device, select=select, progress=progress, options=options)
    source = open_source(filename, backend, options)
    try:
        names = source.resolve(select)
        for n in names:
            info = source.by_name[n]
            adapter.check_dtype(info.dtype, info.shape, n)  # before any I/O
        with progress_callback(progress, f"loading {filename}") as cb:
            views = source.load(adapter, names, cb)
    finally:
        source.close()
    return {n: adapter.to_device(views[n], device) for n in sorted(views)}


def _load_to_device(adapter, filename, *, device, select, progress, options):
    # Buffered: O_DIRECT into staging windows placed without regard to the
    # file's alignment would bounce; not measured on a GPU yet.
    reader = open_reader(filename, options)
    try:
        by_name = {t.name: t for t in reader.tensors()}
        names = resolve(reader, list(by_name), select)
        for n in names:
            adapter.check_dtype(by_name[n].dtype, by_name[n].shape, n)  # before any I/O
        out = _device.load(adapter, reader, names, by_name=by_name, device=device, progress=progress,
                           description=f"loading {filename}")
    finally:
        reader.close()
    return {n: out[n] for n in sorted(out)}


def load_bytes(adapter, data, device):
    device = adapter.check_device(device)
    parsed = parse_checked_bytes(data)
    infos, start = parsed.tensors, parsed.data_start
    for t in infos:
        adapter.check_dtype(t.dtype, t.shape, t.name)
    # One copy of the data section, each tensor 64-byte aligned in it.
    layout = new_packed_arena([t.nbytes for t in infos])
    view, src = memoryview(layout.arena), memoryview(data).cast("B")
    for t, off in zip(infos, layout.offsets):
        view[off:off + t.nbytes] = src[start + t.begin:start + t.end]
    by_name = {t.name: t for t in infos}
    views = adapter.views(layout.arena, packed_items(by_name, [t.name for t in infos], layout.offsets))
    return {n: adapter.to_device(views[n], device) for n in sorted(views)}


def _destinations(adapter, by_name, tensors):
    """([MemorySpan], [owner]) of the caller's tensors, each checked
    against the file's dtype and size before any I/O."""
    dsts, owners = [], []
    for name, tensor in tensors.items():
        d = adapter.describe(tensor, name, for_write=False)
        info = by_name[name]
        if d.dtype != info.dtype:
            raise error("InvalidArgument", f"tensor '{name}': the file holds {info.dtype}, the destination is {d.dtype}")
        need = info.nbytes
        if d.nbytes != need:
            raise error("BufferTooSmall" if d.nbytes < need else "InvalidArgument",
                        f"tensor '{name}': {need} bytes ({info.dtype} {list(info.shape)}) in the file, "
                        f"the destination holds {d.nbytes} ({d.shape})")
        dsts.append(MemorySpan(d.address, d.nbytes))
        owners.append(d.owner)
    return dsts, owners


def read_into(adapter: Any, source: "str | bytes | os.PathLike[str] | os.PathLike[bytes] | Reader",
              tensors: dict[str, Any], *, progress: Any, options: "ReaderOptions") -> dict[str, Any]:
    """Fills the caller's tensors {name: tensor} in place from ``source``: a
    path, URL or index, opened here with ``options`` and closed after (cached
    bytes are copied out of a mapping, cold ones read with O_DIRECT: _caller_memory),
    or an open Reader (safe_open's handle), read with as it is and left open."""
    if not isinstance(tensors, dict):
        raise TypeError(f"read_into takes a dict {{name: tensor}}, got {type(tensors).__name__}")
    owned = not isinstance(source, Reader)
    reader: Reader = source if isinstance(source, Reader) else open_reader(source, options)
    try:
        names = list(tensors)
        reader.select(names)  # TensorNotFound before anything else
        by_name = {t.name: t for t in reader.tensors()}
        dsts, owners = _destinations(adapter, by_name, tensors)
        how = None
        if owned:  # caller memory: copied from the page cache when cached, O_DIRECT when cold
            how = _caller_memory.mapped_or_read(reader, source, options=options, infos=[by_name[n] for n in names],
                                                byte_views=_caller_memory.byte_views(adapter, owners))
            reader = how.reader
        plan = plan_tensors_at(reader, names, dsts, owners)  # checks the destinations either way (overlaps)
        with progress_callback(progress, "reading") as cb:
            if how is not None and how.maps is not None and how.views is not None:
                copy_into(how.maps, reader.shards(), [(by_name[n], v) for n, v in zip(names, how.views)],
                          threads=options.get("threads"), progress=cb)
            else:
                reader.execute(plan, cb)
    finally:
        if owned:
            reader.close()
    return tensors


def _batches(names, sizes, budget):
    """Consecutive runs of names whose aligned sizes fit in ``budget`` bytes."""
    batch: list[str] = []
    used = 0
    for n in names:
        need = aligned(sizes[n])
        if batch and used + need > budget:
            yield batch
            batch, used = [], 0
        batch.append(n)
        used += need
    if batch:
        yield batch


def iter_tensors(adapter, filename, *, select, memory_limit, device, progress, options):
    device = adapter.check_device(device)
    if memory_limit <= 0:
        raise ValueError("memory_limit must be positive")
    reader = open_reader(filename, options)
    try:
        infos = reader.tensors()
        names = resolve(reader, [t.name for t in infos], select)
        by_name = {t.name: t for t in infos}
        sizes = {n: by_name[n].nbytes for n in names}
        for n in names:
            adapter.check_dtype(by_name[n].dtype, by_name[n].shape, n)
            if sizes[n] > memory_limit:
                raise error("BufferTooSmall", f"tensor '{n}' ({sizes[n]} bytes) does not fit in "
                                              f"memory_limit={memory_limit}")
        # Two batches at a time (one read ahead while the consumer works on the
        # other), each at most half the limit, or a whole tensor when larger.
        budget = max(memory_limit // 2, 1)
        batches = list(_batches(names, sizes, budget))
    except BaseException:
        reader.close()
        raise
    if _device.applies(adapter, device):
        return _stream_to_device(adapter, reader, by_name, batches, device=device, progress=progress)
    return _stream(adapter, reader, by_name, batches, device=device, progress=progress)


def _stream_to_device(adapter, reader, by_name, batches, *, device, progress):
    # Each batch straight into device memory; memory_limit bounds the batch
    # (the engine's staging ring is its own, a few pinned buffers).
    total = sum(by_name[n].nbytes for b in batches for n in b)
    done = 0
    staging = None
    try:
        staging = _device.stager(device)  # one ring for every batch
        with progress_callback(progress, "streaming") as cb:
            for batch in batches:
                out = _device.load(adapter, reader, batch, by_name=by_name, device=device, progress=None,
                                   description="streaming", staging=staging)
                for n in batch:
                    done += by_name[n].nbytes
                    if cb:
                        cb(done, total)
                    yield n, out.pop(n)
    finally:
        if staging is not None:
            staging.close()
        reader.close()


def _start(reader, by_name, batch):
    """(the Pending read of ``batch``, its ArenaLayout)."""
    layout = new_packed_arena([by_name[n].nbytes for n in batch])
    dsts = [MemorySpan(layout.arena.address + off, by_name[n].nbytes) for n, off in zip(batch, layout.offsets)]
    plan = plan_tensors_at(reader, batch, dsts, [layout.arena])
    return reader.start(plan), layout


def _stream(adapter, reader, by_name, batches, *, device, progress):
    pending: Any = None
    total = sum(by_name[n].nbytes for b in batches for n in b)
    done = 0
    try:
        with progress_callback(progress, "streaming") as cb:
            if batches:
                pending = _start(reader, by_name, batches[0])
            for k, batch in enumerate(batches):
                job, layout = pending
                job.wait()
                pending = _start(reader, by_name, batches[k + 1]) if k + 1 < len(batches) else None
                views = adapter.views(layout.arena, packed_items(by_name, batch, layout.offsets))
                del layout
                for n in batch:
                    done += by_name[n].nbytes
                    t = views.pop(n)
                    if cb:
                        cb(done, total)
                    yield n, adapter.to_device(t, device)
                    del t
    finally:
        if pending is not None:
            pending[0].cancel()
            try:
                pending[0].wait()
            except BaseException:
                pass
        reader.close()

"""Loading for both frameworks: whole checkpoints into one arena, bytes, the
caller's own tensors, and the bounded-memory streaming iterator."""

import os
from typing import Any

from . import _device
from ._dtypes import error
from ._progress import progress_callback
from ._ringsafe import Reader, parse_bytes, plan_tensors_at
from ._selection import resolve
from ._engine_source import ALIGNMENT, new_packed_arena, packed_items
from ._mapped import copy_into
from ._source import byte_views, mapped_or_read, open_reader, open_source


def load_file(adapter, filename, device, select, progress, backend, options):
    device = adapter.check_device(device)
    if _device.applies(adapter, device) and isinstance(filename, (str, bytes, os.PathLike)):
        return _load_to_device(adapter, filename, device, select, progress, options)
    source = open_source(filename, backend, options)
    try:
        names = source.resolve(select)
        for n in names:
            info = source.by_name[n]
            adapter.check_dtype(info[1], info[2], n)  # before any I/O
        with progress_callback(progress, f"loading {filename}") as cb:
            views = source.load(adapter, names, cb)
    finally:
        source.close()
    return {n: adapter.to_device(views[n], device) for n in sorted(views)}


def _load_to_device(adapter, filename, device, select, progress, options):
    # Buffered: O_DIRECT into staging windows placed without regard to the
    # file's alignment would bounce; not measured on a GPU yet.
    reader = open_reader(filename, options)
    try:
        by_name = {t[0]: t for t in reader.tensors()}
        names = resolve(reader, list(by_name), select)
        for n in names:
            adapter.check_dtype(by_name[n][1], by_name[n][2], n)  # before any I/O
        out = _device.load(adapter, reader, names, by_name, device, progress, f"loading {filename}")
    finally:
        reader.close()
    return {n: out[n] for n in sorted(out)}


def load_bytes(adapter, data, device):
    device = adapter.check_device(device)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    if not memoryview(data).c_contiguous:  # before any byte is read
        raise TypeError(f"expected contiguous bytes: this {type(data).__name__} is strided or reversed "
                        f"(copy it first, e.g. bytes(view))")
    infos, _, start = parse_bytes(data)
    for t in infos:
        adapter.check_dtype(t[1], t[2], t[0])
    # One copy of the data section, each tensor 64-byte aligned in it.
    arena, offsets = new_packed_arena([t[4] - t[3] for t in infos])
    view, src = memoryview(arena), memoryview(data).cast("B")
    for t, off in zip(infos, offsets):
        view[off:off + t[4] - t[3]] = src[start + t[3]:start + t[4]]
    by_name = {t[0]: t for t in infos}
    views = adapter.views(arena, packed_items(by_name, [t[0] for t in infos], offsets))
    return {n: adapter.to_device(views[n], device) for n in sorted(views)}


def read_into(adapter, filename, tensors, progress, options):
    if not isinstance(tensors, dict):
        raise TypeError(f"read_into takes a dict {{name: tensor}}, got {type(tensors).__name__}")
    reader = filename if isinstance(filename, Reader) else open_reader(filename, options)
    try:
        names = list(tensors)
        reader.select(names)  # TensorNotFound before anything else
        by_name = {t[0]: t for t in reader.tensors()}
        dsts, owners = [], []
        for name in names:
            dtype, shape, addr, nbytes, owner = adapter.describe(tensors[name], name, for_write=False)
            info = by_name[name]
            if dtype != info[1]:
                raise error("InvalidArgument",
                            f"tensor '{name}': the file holds {info[1]}, the destination is {dtype}")
            need = info[4] - info[3]
            if nbytes != need:
                raise error("BufferTooSmall" if nbytes < need else "InvalidArgument",
                            f"tensor '{name}': {need} bytes ({info[1]} {info[2]}) in the file, "
                            f"the destination holds {nbytes} ({shape})")
            dsts.append((addr, nbytes))
            owners.append(owner)
        maps: Any = None
        views: Any = None
        if reader is not filename:  # caller memory: copied from the page cache when cached, O_DIRECT when cold
            maps, views, reader = mapped_or_read(reader, filename, options, [by_name[n] for n in names],
                                                 byte_views(adapter, owners))
        plan = plan_tensors_at(reader, names, dsts, owners)  # checks the destinations either way (overlaps)
        with progress_callback(progress, "reading") as cb:
            if maps is not None:
                copy_into(maps, reader.shards(), [(by_name[n], v) for n, v in zip(names, views)],
                          options.get("threads"), cb)
            else:
                reader.execute(plan, cb)
    finally:
        if reader is not filename:
            reader.close()
    return tensors


def _batches(names, sizes, budget):
    """Consecutive runs of names whose aligned sizes fit in ``budget`` bytes."""
    batch: list[str] = []
    used = 0
    for n in names:
        need = -(-sizes[n] // ALIGNMENT) * ALIGNMENT
        if batch and used + need > budget:
            yield batch
            batch, used = [], 0
        batch.append(n)
        used += need
    if batch:
        yield batch


def iter_tensors(adapter, filename, select, memory_limit, device, progress, options):
    device = adapter.check_device(device)
    if memory_limit <= 0:
        raise ValueError("memory_limit must be positive")
    reader = open_reader(filename, options)
    try:
        infos = reader.tensors()
        names = resolve(reader, [t[0] for t in infos], select)
        by_name = {t[0]: t for t in infos}
        sizes = {n: by_name[n][4] - by_name[n][3] for n in names}
        for n in names:
            adapter.check_dtype(by_name[n][1], by_name[n][2], n)
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
        return _stream_to_device(adapter, reader, by_name, batches, device, progress)
    return _stream(adapter, reader, by_name, batches, device, progress)


def _stream_to_device(adapter, reader, by_name, batches, device, progress):
    # Each batch straight into device memory; memory_limit bounds the batch
    # (the engine's staging ring is its own, a few pinned buffers).
    total = sum(by_name[n][4] - by_name[n][3] for b in batches for n in b)
    done = 0
    staging = None
    try:
        staging = _device.stager(device)  # one ring for every batch
        with progress_callback(progress, "streaming") as cb:
            for batch in batches:
                out = _device.load(adapter, reader, batch, by_name, device, None, "streaming", staging)
                for n in batch:
                    done += by_name[n][4] - by_name[n][3]
                    if cb:
                        cb(done, total)
                    yield n, out.pop(n)
    finally:
        if staging is not None:
            staging.close()
        reader.close()


def _start(reader, by_name, batch):
    arena, offsets = new_packed_arena([by_name[n][4] - by_name[n][3] for n in batch])
    dsts = [(arena.address + off, by_name[n][4] - by_name[n][3]) for n, off in zip(batch, offsets)]
    plan = plan_tensors_at(reader, batch, dsts, [arena])
    return reader.start(plan), arena, offsets


def _stream(adapter, reader, by_name, batches, device, progress):
    pending: Any = None  # (Pending, Arena, offsets) of the batch being read
    total = sum(by_name[n][4] - by_name[n][3] for b in batches for n in b)
    done = 0
    try:
        with progress_callback(progress, "streaming") as cb:
            if batches:
                pending = _start(reader, by_name, batches[0])
            for k, batch in enumerate(batches):
                job, arena, offsets = pending
                job.wait()
                pending = _start(reader, by_name, batches[k + 1]) if k + 1 < len(batches) else None
                views = adapter.views(arena, packed_items(by_name, batch, offsets))
                del arena
                for n in batch:
                    done += by_name[n][4] - by_name[n][3]
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

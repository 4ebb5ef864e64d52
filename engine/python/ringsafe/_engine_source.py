"""The owned-memory source: parallel io_uring / HTTP reads by the engine into
arenas (backend="pread", URLs, s3://, remote indexes); the base of the mmap
source. The arenas' layout is _memory's."""

from ._described import AddressedRequest, MemorySpan
from ._memory import file_layout_arena, new_packed_arena, packed_items
from ._ringsafe import plan_requests_at, plan_tensors_at
from ._selection import not_found, resolve


class EngineSource:
    """Owned memory filled by the engine's parallel reads (_source.Source)."""

    def __init__(self, reader):
        self.reader = reader
        self.infos = reader.tensors()
        self.by_name = {t.name: t for t in self.infos}

    def metadata(self):
        return self.reader.metadata()

    def resolve(self, select):
        """Selected names in data order (select: None, a name/glob or a list)."""
        return resolve(self.reader, [t.name for t in self.infos], select)

    def check(self, name):
        """TensorNotFound, with the engine's message, for a name not in the file."""
        if name not in self.by_name:
            self.reader.select([name])
            raise not_found(name, self.reader.spec)

    def load(self, adapter, names, progress):
        """{name: tensor} for ``names`` (data order): one parallel read into one
        arena, laid out as in the file when the selection covers most of its
        span (one long read per shard; O_DIRECT lands in place), else packed."""
        sizes = [self.by_name[n].nbytes for n in names]
        layout = file_layout_arena([self.by_name[n] for n in names], sum(sizes)) or new_packed_arena(sizes)
        arena = layout.arena
        dsts = [MemorySpan(arena.address + off, n) for off, n in zip(layout.offsets, sizes)]
        self.reader.execute(plan_tensors_at(self.reader, names, dsts, [arena]), progress)
        return adapter.views(arena, packed_items(self.by_name, names, layout.offsets))

    def one(self, adapter, name):
        """One whole tensor in new memory."""
        info = self.by_name[name]
        nbytes = info.nbytes
        fresh = adapter.fresh(info.dtype, info.shape, nbytes, name)
        if nbytes:
            self.reader.execute(plan_tensors_at(self.reader, [name], [MemorySpan(fresh.address, nbytes)], [fresh.tensor]))
        return fresh.tensor

    def box(self, adapter, info, box, box_shape):
        """The box [(start, stop), ...] of a tensor, in new memory of shape box_shape."""
        name, dtype = info.name, info.dtype
        nbytes = self.reader.box_bytes(name, box) if all(box_shape) else 0
        fresh = adapter.fresh(dtype, box_shape, nbytes, name)
        if nbytes:
            request = AddressedRequest(name, box, fresh.address, nbytes)
            self.reader.execute(plan_requests_at(self.reader, [request], [fresh.tensor]))
        return fresh.tensor

    def read_ahead(self, names):
        """Nothing to arm: the engine reads what it is asked for (MappedSource reads ahead)."""

    def read_ahead_from(self, name):
        """Nothing armed (see read_ahead)."""

    def close(self):
        self.reader.close()

    @property
    def closed(self):
        return self.reader.closed

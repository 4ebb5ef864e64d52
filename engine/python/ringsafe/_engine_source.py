"""The owned-memory source: parallel io_uring / HTTP reads by the engine into
arenas (backend="pread", URLs, s3://, remote indexes); the base of the mmap
source. Also where arenas are laid out."""

from ._dtypes import error
from ._memory import new_arena
from ._ringsafe import plan_requests_at, plan_tensors_at
from ._selection import resolve

ALIGNMENT = 64  # every tensor of a packed arena starts on a 64-byte boundary


def packed_items(by_name, names, offsets):
    """(name, offset, dtype, shape, nbytes) of ``names`` placed at ``offsets``."""
    return [(n, off, by_name[n][1], by_name[n][2], by_name[n][4] - by_name[n][3]) for n, off in zip(names, offsets)]


class EngineSource:
    """Owned memory filled by the engine's parallel reads. Every source's
    load/one/box take names the caller resolved and whose dtypes it checked
    (adapter.check_dtype) before any I/O."""

    backend = "pread"

    def __init__(self, reader):
        self.reader = reader
        self.infos = reader.tensors()
        self.by_name = {t[0]: t for t in self.infos}

    def metadata(self):
        return self.reader.metadata()

    def resolve(self, select):
        """Selected names in data order (select: None, a name/glob or a list)."""
        return resolve(self.reader, [t[0] for t in self.infos], select)

    def check(self, name):
        """TensorNotFound, with the engine's message, for a name not in the file."""
        if name not in self.by_name:
            self.reader.select([name])
            raise error("TensorNotFound", f"File does not contain tensor {name}")

    def load(self, adapter, names, progress):
        """{name: tensor} for ``names`` (data order): one parallel read into one
        arena, laid out as in the file when the selection covers most of its
        span (one long read per shard; O_DIRECT lands in place), else packed."""
        sizes = [self.by_name[n][4] - self.by_name[n][3] for n in names]
        arena, offsets = file_layout_arena([self.by_name[n] for n in names], sum(sizes))
        if arena is None:
            arena, offsets = new_packed_arena(sizes)
        dsts = [(arena.address + off, n) for off, n in zip(offsets, sizes)]
        self.reader.execute(plan_tensors_at(self.reader, names, dsts, [arena]), progress)
        return adapter.views(arena, packed_items(self.by_name, names, offsets))

    def one(self, adapter, name):
        """One whole tensor in new memory."""
        info = self.by_name[name]
        nbytes = info[4] - info[3]
        t, addr = adapter.fresh(info[1], info[2], nbytes, name)
        if nbytes:
            self.reader.execute(plan_tensors_at(self.reader, [name], [(addr, nbytes)], [t]))
        return t

    def box(self, adapter, info, box, box_shape):
        """The box [(start, stop), ...] of a tensor, in new memory of shape box_shape."""
        name, dtype = info[0], info[1]
        nbytes = self.reader.box_bytes(name, box) if all(box_shape) else 0
        block, addr = adapter.fresh(dtype, box_shape, nbytes, name)
        if nbytes:
            self.reader.execute(plan_requests_at(self.reader, [(name, box, addr, nbytes)], [block]))
        return block

    def close(self):
        self.reader.close()

    @property
    def closed(self):
        return self.reader.closed


def file_layout_arena(infos, selected_bytes):
    """(arena, offsets) placing each tensor at its offset in the file's data
    section, relative to a 4096-aligned base, when the tensors are in one shard
    and cover at least 90 % of their span; (None, None) otherwise."""
    if not infos or len({t[5] for t in infos}) != 1:
        return None, None
    lo = min(t[3] for t in infos) // 4096 * 4096
    hi = max(t[4] for t in infos)
    if selected_bytes < 0.9 * (hi - lo):
        return None, None
    return new_arena(hi - lo), [t[3] - lo for t in infos]


def new_packed_arena(sizes):
    """(arena, offsets) holding ``sizes`` bytes each, every start ALIGNMENT-aligned."""
    offsets, size = [], 0
    for n in sizes:
        size = -(-size // ALIGNMENT) * ALIGNMENT
        offsets.append(size)
        size += n
    return new_arena(size), offsets

"""safe_open: the reference's lazy, per-tensor API on ringsafe's engine."""

from ._dtypes import error
from ._frameworks import adapter_for
from ._index import plan_index
from ._load import ALIGNMENT, _items, open_reader, read_into
from ._progress import progress_callback
from ._selection import resolve


class safe_open:
    """Opens a checkpoint for reading tensors one at a time, as
    ``safetensors.safe_open`` does: ``with safe_open(path, framework="pt") as f:
    f.get_tensor(name)``. ``path`` may also be an http(s):// or s3:// URL or a
    sharded ``*.index.json``; ``select`` (names or globs) limits what keys()
    shows; ``options`` go to the Reader (threads, connections, token, ...).
    Only the header is read here; each get_tensor() reads its bytes with
    parallel io_uring or HTTP Range reads, the GIL released."""

    def __init__(self, filename, framework, device="cpu", *, select=None, **options):
        self._adapter = adapter_for(framework)
        self._device = self._adapter.check_device(device)
        self._reader = open_reader(filename, options)
        infos = self._reader.tensors()
        order = resolve(self._reader, [t[0] for t in infos], select)
        self._infos = {t[0]: t for t in infos}
        self._order = order
        self._selected = set(order)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def close(self):
        """Releases the file; later calls raise SafetensorError."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _open_reader(self):
        if self._reader is None:
            raise error("InvalidArgument", "File is closed")
        return self._reader

    def _info(self, name):
        reader = self._open_reader()
        if name not in self._selected:
            reader.select([name])  # TensorNotFound with the engine's message
            raise error("TensorNotFound", f"tensor '{name}' is not in this handle's selection")
        return self._infos[name]

    def keys(self):
        """Tensor names, sorted."""
        self._open_reader()
        return sorted(self._order)

    def offset_keys(self):
        """Tensor names in the order of their data in the file."""
        self._open_reader()
        return list(self._order)

    def metadata(self):
        """The header's __metadata__ (dict of str), or None."""
        return self._open_reader().metadata()

    def get_tensor(self, name):
        """Reads one whole tensor into new memory."""
        info = self._info(name)
        nbytes = info[4] - info[3]
        t, addr = self._adapter.fresh(info[1], info[2], nbytes, name)
        if nbytes:
            plan = self._reader.plan_tensors([name], [(addr, nbytes)], [t])
            self._reader.execute(plan)
        return self._adapter.to_device(t, self._device)

    def get_tensors(self, progress=None):
        """Every (selected) tensor, {name: tensor} sorted by name: one parallel
        read into one arena, each tensor a view of it."""
        reader = self._open_reader()
        for n in self._order:
            self._adapter.check_dtype(self._infos[n][1], self._infos[n][2], n)
        with progress_callback(progress, "loading") as cb:
            arena, offsets = reader.read_packed(self._order, ALIGNMENT, cb)
        views = self._adapter.views(arena, _items(list(self._infos.values()), self._order, offsets))
        return {n: self._adapter.to_device(views[n], self._device) for n in sorted(views)}

    def get_slice(self, name):
        """A lazy view of one tensor: get_shape(), get_dtype(), and indexing
        that reads only the bytes the index needs."""
        return TensorSlice(self, self._info(name))

    def read_into(self, tensors, progress=None):
        """Fills existing CPU tensors {name: tensor} in place (no copy)."""
        return read_into(self._adapter, self._open_reader(), tensors, progress, {})


def _plain(entry):
    """Whether a relative index entry keeps a dimension as it is read (a step-1 slice)."""
    return isinstance(entry, slice) and entry.step in (None, 1)


class TensorSlice:
    """One tensor of an open file, read on indexing. Indexes follow NumPy:
    ints (negative ones wrap), slices with any step (negative too), Ellipsis,
    None, lists of ints and 1-d integer arrays (NumPy or torch); stops clamp; an
    out-of-range int raises IndexError, as do boolean masks and nested lists.
    Only the bounding box of the index is read (one contiguous range when
    only leading dimensions are sliced)."""

    def __init__(self, handle, info):
        self._handle = handle
        self._info = info

    def get_shape(self):
        return list(self._info[2])

    def get_dtype(self):
        return self._info[1]

    @property
    def shape(self):
        return self.get_shape()

    @property
    def dtype(self):
        return self.get_dtype()

    def __len__(self):
        if not self._info[2]:
            raise TypeError("len() of a 0-d tensor")
        return self._info[2][0]

    def __getitem__(self, index):
        h = self._handle
        reader = h._open_reader()
        name, dtype, shape = self._info[0], self._info[1], self._info[2]
        box, relative, flips, last = plan_index(index, shape)
        if dtype == "F4" and last is not None and (len(shape) - 1 in flips or not _plain(last)):
            raise error("InvalidArgument",
                        f"tensor '{name}': F4 values are packed two per byte; an index that reverses or "
                        f"picks values of the last dimension splits bytes (index {index!r})")
        whole = all(b == (0, n) for b, n in zip(box, shape))
        box_shape = [b[1] - b[0] for b in box]
        if whole:
            block = h.get_tensor(name)
            block = block.cpu() if hasattr(block, "cpu") else block
        else:
            nbytes = reader.box_bytes(name, box) if all(box_shape) else 0
            block, addr = h._adapter.fresh(dtype, box_shape, nbytes, name)
            if nbytes:
                plan = reader.plan_requests([(name, box, addr, nbytes)], [block])
                reader.execute(plan)
        return h._adapter.to_device(h._adapter.index(block, relative, flips), h._device)

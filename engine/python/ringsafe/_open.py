"""safe_open: the reference's lazy, per-tensor API on ringsafe's sources."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _device
from ._errors import SliceIndexError, error
from ._frameworks import adapter_for
from ._index import plan_index
from ._load import read_into
from ._progress import progress_callback
from ._source import open_source

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Literal

    import torch
    from typing_extensions import Self, Unpack

    from ._ringsafe import TensorInfo
    from ._typing import Backend, BinaryFile, Metadata, Progress, ReaderOptions, Select, Source


class safe_open:
    """Opens a checkpoint for reading tensors one at a time, as
    ``safetensors.safe_open`` does: ``with safe_open(path, framework="pt") as f:
    f.get_tensor(name)``. ``filename`` may be a path, an http(s)://, s3://, gs://, az://
    or hf:// URL, a sharded ``*.index.json`` or an open binary file object.
    ``device="cuda:N"``: get_tensor and get_tensors read straight into device
    memory through one ring of pinned staging buffers kept until close().
    ``backend="mmap"`` (default): a local file's tensors are zero-copy views of
    a private mapping, made resident before they are handed out, and the file
    is read ahead in file order; ``"pread"`` (and every remote source): owned
    memory filled by parallel io_uring or HTTP reads. ``select`` (names or
    globs) limits what keys() shows; ``options`` go to the Reader (threads,
    connections, token, ...). Only the header is read here."""

    def __init__(self, filename: Source, framework: str, device: str | int | torch.device = "cpu", *,
                 backend: Backend = "mmap", select: Select = None, **options: Unpack[ReaderOptions]) -> None:
        self._adapter = adapter_for(framework)
        self._device = self._adapter.check_device(device)
        self._source = open_source(filename, backend, options)
        try:
            self._order = self._source.resolve(select)
            self._source.read_ahead(self._order)
        except BaseException:
            self._source.close()
            raise
        self._selected = set(self._order)
        # device="cuda:N" on an engine source: tensors are read straight into
        # device memory through one staging ring kept for the handle's life.
        self._direct = _device.applies(self._adapter, self._device) and self._source.reader is not None
        self._staging = None
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        self.close()
        return False

    def close(self) -> None:
        """Releases the file (tensors handed out stay valid); later calls raise SafetensorError."""
        staging, self._staging = self._staging, None
        try:
            if staging is not None:
                staging.close()
        finally:
            self._source.close()

    def _open_source(self):
        source = self._source
        if source.closed:
            raise error("InvalidArgument", "File is closed")
        return source

    def _info(self, name):
        source = self._open_source()
        if name not in self._selected:
            source.check(name)  # TensorNotFound with the engine's message
            raise error("TensorNotFound", f"tensor '{name}' is not in this handle's selection")
        return source.by_name[name]

    def keys(self) -> list[str]:
        """Tensor names, sorted."""
        self._open_source()
        return sorted(self._order)

    def offset_keys(self) -> list[str]:
        """Tensor names in the order of their data in the file."""
        self._open_source()
        return list(self._order)

    def metadata(self) -> Metadata | None:
        """The header's __metadata__ (dict of str), or None."""
        return self._open_source().metadata()

    def get_tensor(self, name: str) -> Any:  # torch.Tensor (framework="pt") or numpy.ndarray ("np")
        """One whole tensor: a view of the mapping (mmap), or new memory."""
        info = self._info(name)
        self._adapter.check_dtype(info.dtype, info.shape, name)
        if self._direct:
            self._source.read_ahead_from(name)  # a key loop: the file streams into the page cache ahead of it
            return self._to_device([name], None)[name]
        return self._adapter.to_device(self._source.one(self._adapter, name), self._device)

    def _to_device(self, names, progress):
        # {name: tensor} read by the engine into new device tensors, through
        # the handle's staging ring (its reads run one at a time).
        source = self._open_source()
        with self._lock:
            if self._staging is None:
                self._staging = _device.stager(self._device)
            staging = self._staging
        return _device.load(self._adapter, source.reader, names, by_name=source.by_name, device=self._device,
                            progress=progress, description="loading", staging=staging)

    def get_tensors(self, progress: Progress = None) -> dict[str, Any]:
        """Every (selected) tensor, {name: tensor} sorted by name, made
        resident (mmap) or read (pread) in parallel in one call."""
        source = self._open_source()
        for n in self._order:
            self._adapter.check_dtype(source.by_name[n].dtype, source.by_name[n].shape, n)
        if self._direct:
            out = self._to_device(self._order, progress)
            return {n: out[n] for n in sorted(out)}
        with progress_callback(progress, "loading") as cb:
            views = source.load(self._adapter, self._order, cb)
        return {n: self._adapter.to_device(views[n], self._device) for n in sorted(views)}

    def get_slice(self, name: str) -> TensorSlice:
        """A lazy view of one tensor: get_shape(), get_dtype(), and indexing
        that reads only the bytes the index needs."""
        return TensorSlice(self, self._info(name))

    def read_into(self, tensors: dict[str, Any], progress: Progress = None) -> dict[str, Any]:
        """Fills existing CPU tensors {name: tensor} in place (no copy); paths,
        URLs and indexes only (not file objects)."""
        source = self._open_source()
        if source.reader is None:
            raise error("InvalidArgument", "read_into needs a path or URL, not a file object")
        return read_into(self._adapter, source.reader, tensors, progress=progress, options={})


def _safe_open_handle(f: BinaryFile, framework: str, device: str | int | torch.device = "cpu", *,
                      backend: Backend = "mmap") -> safe_open:
    """safe_open over an open binary file object (the reference's name for it)."""
    if isinstance(f, (str, bytes)) or not hasattr(f, "read"):
        raise TypeError(f"_safe_open_handle takes an open binary file object, got {type(f).__name__}")
    return safe_open(f, framework, device, backend=backend)


def _plain(entry: object) -> bool:
    """Whether a relative index entry keeps a dimension as it is read (a step-1 slice)."""
    return isinstance(entry, slice) and entry.step in (None, 1)


class TensorSlice:
    """One tensor of an open file, read on indexing. Indexes follow NumPy:
    ints (negative ones wrap), slices with any step (negative too), Ellipsis,
    None, lists of ints and 1-d integer arrays (NumPy or torch); stops clamp; an
    out-of-range int raises SliceIndexError, both an IndexError (as the
    reference's torch slices raise) and a SafetensorError (as its NumPy slices
    raise). Only the bounding box of the index is read (one contiguous range
    when only leading dimensions are sliced); boolean masks, nested lists and
    multi-dimensional index arrays read the whole tensor and index it with the
    framework's own indexing, as the reference's torch slices do."""

    def __init__(self, handle: safe_open, info: TensorInfo) -> None:
        self._handle = handle
        self._info = info

    def get_shape(self) -> list[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        return self._info.dtype

    @property
    def shape(self) -> list[int]:
        return self.get_shape()

    @property
    def dtype(self) -> str:
        return self.get_dtype()

    def __len__(self) -> int:
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def __getitem__(self, index: Any) -> Any:
        h = self._handle
        source = h._open_source()
        name, dtype, shape = self._info.name, self._info.dtype, self._info.shape
        try:
            plan = plan_index(index, shape, h._adapter.framework)
        except SliceIndexError as e:
            if not getattr(e, "whole", False):
                raise
            h._adapter.check_dtype(dtype, shape, name)
            return h._adapter.to_device(source.one(h._adapter, name)[index], h._device)
        if dtype == "F4" and plan.last is not None and (len(shape) - 1 in plan.flips or not _plain(plan.last)):
            raise error("InvalidArgument",
                        f"tensor '{name}': F4 values are packed two per byte; an index that reverses or "
                        f"picks values of the last dimension splits bytes (index {index!r})")
        h._adapter.check_dtype(dtype, shape, name)
        if all(b == (0, n) for b, n in zip(plan.box, shape)):
            block = source.one(h._adapter, name)
        else:
            block = source.box(h._adapter, self._info, plan.box, [b[1] - b[0] for b in plan.box])
        return h._adapter.to_device(h._adapter.index(block, plan.relative, plan.flips), h._device)

"""Checkpoints in open Python file objects that are not operating-system
files (io.BytesIO, fsspec): read with the object's own seek() and readinto()
(or read()), one tensor at a time, under a lock. (_file_object opens a file object
backed by an operating-system file through /proc/self/fd instead.)"""

import ctypes
import io
import os
import threading

from ._errors import SafetensorError, error
from ._ringsafe import glob_match, parse_header, parse_prefix
from ._selection import not_found, resolve


def _writable_bytes(addr, nbytes):
    return memoryview((ctypes.c_char * nbytes).from_address(addr)).cast("B")


def describe(f):
    """How errors name a file object: its ``name`` when it has one; else the
    file its descriptor is open on (a BZ2File over a file), else its type."""
    name = getattr(f, "name", None)
    if isinstance(name, (str, bytes)) and name:
        return repr(name) if isinstance(name, bytes) else name
    try:
        fd = f.fileno()
        return f"{type(f).__name__} over {os.readlink(f'/proc/self/fd/{fd}')}"
    except Exception:
        pass
    if isinstance(name, int):
        return f"{type(f).__name__} (descriptor {name})"
    return type(f).__name__


def protocol_error(name, what):
    """The error for a file object (named ``name``: describe()) that does not behave as a binary file."""
    return error("InvalidArgument", f"{name}: the file object broke the file protocol: {what}")


class StreamSource:
    """A file object read through its own seek/readinto (_source.Source); no
    engine Reader (reader is None)."""

    reader: object = None  # as Source declares it

    def __init__(self, f):
        self._f = f
        self._name = describe(f)
        seekable = getattr(f, "seekable", None)
        if seekable is not None and not seekable():
            raise error("InvalidArgument", f"{self._name}: a {type(f).__name__} that cannot seek: safe_open needs "
                                           f"random access")
        self._lock = threading.Lock()
        size = self._seek(0, io.SEEK_END)
        try:
            prefix = self._read_at(0, min(8, size))
            n = parse_prefix(prefix, size)
            parsed = parse_header(self._read_at(8, n), size)
            self.infos, self._metadata, self._data_start = parsed.tensors, parsed.metadata, parsed.data_start
        except SafetensorError as e:
            if str(e).startswith(self._name + ":"):
                raise
            raise error(getattr(e, "kind", "InvalidHeaderDeserialization"), f"{self._name}: {e}") from None
        self.by_name = {t.name: t for t in self.infos}
        self.closed = False

    def _seek(self, offset, whence=io.SEEK_SET):
        """f.seek(), whose result must be the new position (a non-negative int)."""
        pos = self._f.seek(offset, whence)
        if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
            raise protocol_error(self._name, f"seek() returned {pos!r}, not the new position")
        if whence == io.SEEK_SET and pos != offset:
            raise protocol_error(self._name, f"seek({offset}) moved to {pos}")
        return pos

    def _read_at(self, offset, nbytes, into=None):
        """``nbytes`` bytes at ``offset`` (into the writable memoryview ``into`` if given).
        readinto() must return how many bytes it stored (0..len(buffer)), read()
        a C-contiguous bytes-like object of at most the size asked for; anything
        else is a SafetensorError naming the object, never a hang or a write
        outside the buffer."""
        out = into if into is not None else memoryview(bytearray(nbytes))
        with self._lock:
            self._seek(offset)
            got = 0
            readinto = getattr(self._f, "readinto", None)
            while got < nbytes:
                want = nbytes - got
                if readinto is not None:
                    k = readinto(out[got:])
                    if k is None:
                        raise protocol_error(self._name, "readinto() returned None (no data available from a "
                                                    "non-blocking object)")
                    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= want:
                        raise protocol_error(self._name, f"readinto() of {want} bytes returned {k!r}")
                else:
                    chunk = self._f.read(want)
                    try:
                        view = memoryview(chunk)
                    except TypeError:
                        raise protocol_error(self._name, f"read() returned a {type(chunk).__name__}, "
                                                    f"not bytes") from None
                    if not view.c_contiguous:
                        raise protocol_error(self._name, "read() returned a strided view")
                    k = view.nbytes
                    if k > want:
                        raise protocol_error(self._name, f"read({want}) returned {k} bytes")
                    out[got:got + k] = view.cast("B")
                if not k:
                    raise error("Truncated", f"{self._name}: the file object ended at offset {offset + got}, "
                                             f"{nbytes - got} bytes short of what the header describes")
                got += k
        return out if into is not None else bytes(out)

    def metadata(self):
        return self._metadata

    def check(self, name):
        """TensorNotFound for a name not in the file."""
        if name not in self.by_name:
            raise not_found(name, self._name)

    def select(self, names):
        """As Reader.select: TensorNotFound naming the first missing name."""
        for n in names:
            self.check(n)
        return names

    def select_glob(self, patterns):
        """As Reader.select_glob: the names matching any glob, in data order."""
        return [t.name for t in self.infos if any(glob_match(p, t.name) for p in patterns)]

    def resolve(self, select):
        return resolve(self, [t.name for t in self.infos], select)

    def one(self, adapter, name):
        info = self.by_name[name]
        nbytes = info.nbytes
        fresh = adapter.fresh(info.dtype, info.shape, nbytes, name)
        if nbytes:
            self._read_at(self._data_start + info.begin, nbytes, _writable_bytes(fresh.address, nbytes))
        return fresh.tensor

    def load(self, adapter, names, progress):
        total = sum(self.by_name[n].nbytes for n in names)
        out, done = {}, 0
        for n in names:
            out[n] = self.one(adapter, n)
            done += self.by_name[n].nbytes
            if progress:
                progress(done, total)
        return out

    def box(self, adapter, info, box, box_shape):
        if info.dtype == "F4":  # refused before anything is read
            raise error("InvalidArgument", f"tensor '{info.name}': slicing F4 tensors of a file object is not supported; "
                                           f"use get_tensor")
        whole = self.one(adapter, info.name)
        return whole[tuple(slice(a, b) for a, b in box)]

    def read_ahead(self, names):
        """Nothing to arm: one tensor at a time, through the object."""

    def read_ahead_from(self, name):
        """Nothing armed (see read_ahead)."""

    def close(self):
        self.closed = True

"""Checkpoints in open Python file objects that are not operating-system
files (io.BytesIO, fsspec): read with the object's own seek() and readinto()
(or read()), one tensor at a time, under a lock. (_source opens a file object
backed by an operating-system file through /proc/self/fd instead.)"""

import ctypes
import io
import threading

from ._dtypes import error
from ._ringsafe import glob_match, parse_header, parse_prefix
from ._selection import is_glob


def _writable_bytes(addr, nbytes):
    return memoryview((ctypes.c_char * nbytes).from_address(addr)).cast("B")


class StreamSource:
    backend = "stream"

    def __init__(self, f):
        seekable = getattr(f, "seekable", None)
        if seekable is not None and not seekable():
            raise error("InvalidArgument", f"a {type(f).__name__} that cannot seek: safe_open needs random access")
        self._f = f
        self._lock = threading.Lock()
        self._name = getattr(f, "name", None) or type(f).__name__
        size = f.seek(0, io.SEEK_END)
        prefix = self._read_at(0, min(8, size))
        n = parse_prefix(prefix, size)
        self.infos, self._metadata, self._data_start = parse_header(self._read_at(8, n), size)
        self.by_name = {t[0]: t for t in self.infos}
        self.closed = False

    def _read_at(self, offset, nbytes, into=None):
        """``nbytes`` bytes at ``offset`` (into the writable memoryview ``into`` if given)."""
        out = into if into is not None else memoryview(bytearray(nbytes))
        with self._lock:
            self._f.seek(offset)
            got = 0
            readinto = getattr(self._f, "readinto", None)
            while got < nbytes:
                if readinto is not None:
                    k = readinto(out[got:])
                else:
                    chunk = self._f.read(nbytes - got)
                    k = len(chunk)
                    out[got:got + k] = chunk
                if not k:
                    raise error("Truncated", f"{self._name}: the file object ended at offset {offset + got}, "
                                             f"{nbytes - got} bytes short of what the header describes")
                got += k
        return out if into is not None else bytes(out)

    def metadata(self):
        return self._metadata

    def check(self, name):
        if name not in self.by_name:
            raise error("TensorNotFound", f"File does not contain tensor {name}")

    def resolve(self, select):
        order = [t[0] for t in self.infos]
        if select is None:
            return order
        items = [select] if isinstance(select, str) else list(select)
        chosen = set()
        for s in items:
            if not isinstance(s, str):
                raise TypeError(f"select= takes names or glob patterns (str), got {type(s).__name__}")
            if is_glob(s):
                chosen.update(n for n in order if glob_match(s, n))
            else:
                self.check(s)
                chosen.add(s)
        return [n for n in order if n in chosen]

    def one(self, adapter, name):
        info = self.by_name[name]
        nbytes = info[4] - info[3]
        t, addr = adapter.fresh(info[1], info[2], nbytes, name)
        if nbytes:
            self._read_at(self._data_start + info[3], nbytes, _writable_bytes(addr, nbytes))
        return t

    def load(self, adapter, names, progress):
        total = sum(self.by_name[n][4] - self.by_name[n][3] for n in names)
        out, done = {}, 0
        for n in names:
            out[n] = self.one(adapter, n)
            done += self.by_name[n][4] - self.by_name[n][3]
            if progress:
                progress(done, total)
        return out

    def box(self, adapter, info, box, box_shape):
        whole = self.one(adapter, info[0])
        if info[1] == "F4":
            raise error("InvalidArgument", f"tensor '{info[0]}': slicing F4 tensors of a file object is not supported; "
                                           f"use get_tensor")
        return whole[tuple(slice(a, b) for a, b in box)]

    def close(self):
        self.closed = True

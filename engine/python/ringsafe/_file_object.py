"""Open Python file objects as checkpoints (open_source's part for them): a
plain binary operating-system file (io.FileIO, or a buffered reader over one)
is read by the engine through /proc/self/fd, its errors naming the object's
name; a closed one is reopened by its name, as the reference does, and so is
a text file open on a path; any other binary file object (BytesIO, fsspec,
GzipFile) is a StreamSource, read through its own read()."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import SafetensorError, error
from ._stream import StreamSource, describe, protocol_error

if TYPE_CHECKING:
    from ._typing import ReaderOptions

T = TypeVar("T")


def _os_file(f):
    """The descriptor of a plain binary operating-system file (io.FileIO, or a
    buffered reader over one) on a regular file, else None. Wrappers that
    transform the bytes (GzipFile, BZ2File, text layers) expose the underlying
    file's fileno() too: they are read through their own read()."""
    raw = f.raw if isinstance(f, (io.BufferedReader, io.BufferedRandom)) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        fd = raw.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):
        return None


def _renamed(e, proc, name):
    """``e`` (raised for ``proc``, a /proc/self/fd path) naming the file object's ``name`` instead."""
    out: SafetensorError
    if isinstance(e, OSError) and isinstance(e, SafetensorError):
        out = type(e)(e.errno, (e.strerror or "").replace(proc, name), name)
        detail = getattr(e, "detail", None)
        if isinstance(detail, str):
            out.__notes__ = [detail.replace(proc, name)]
            setattr(out, "detail", out.__notes__[0])  # the system errors' .detail (_ringsafe.pyi)
    elif isinstance(e, SafetensorError):
        out = SafetensorError(str(e).replace(proc, name))
    else:
        return e
    out.kind = getattr(e, "kind", None)
    return out


def file_object_source(f: Any, options: "ReaderOptions", open_path: Callable[[Any], T]) -> T | StreamSource:
    """The source for an open binary file object ``f``: a StreamSource read
    through its own read(), or what ``open_path(path)`` (the dispatcher's
    callback: how it opens a path) returns for the path to read it by, the
    /proc/self/fd one of a plain file (its errors naming ``f``'s name)."""
    name = getattr(f, "name", None)
    named = isinstance(name, (str, bytes, os.PathLike))
    if getattr(f, "closed", False):
        if named:
            return open_path(name)  # closed: reopened by its name, as the reference does
        raise error("InvalidArgument", f"the {type(f).__name__} is closed and has no name to reopen it by")
    if isinstance(f, io.TextIOBase):
        if named and os.path.isfile(name):  # type: ignore[arg-type]  # named: a str, bytes or PathLike
            return open_path(name)  # open(path, "r"): the file it names, read by that name, as the reference does
        raise protocol_error(describe(f), f"a {type(f).__name__} is text: its read() returns str, not bytes")
    fd = _os_file(f)
    if fd is None:
        if options:
            raise error("InvalidArgument", f"reader options ({', '.join(sorted(options))}) apply to paths "
                                           f"and URLs, not to a {type(f).__name__}")
        return StreamSource(f)
    proc = f"/proc/self/fd/{fd}"  # the engine reads it: in parallel, the GIL released
    try:
        return open_path(proc)
    except (OSError, SafetensorError) as e:
        raise _renamed(e, proc, describe(f)) from None

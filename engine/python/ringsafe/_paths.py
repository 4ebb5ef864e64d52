"""What a path argument may be: a local path (str, bytes or os.PathLike, as
the operating system takes it: a str from os.fsdecode of bytes that are not
UTF-8 names those bytes), an http(s):// or s3:// URL, or a sharded
``*.index.json``, local or remote."""

import os


def is_path(path):
    """Whether ``path`` is something spec_of() takes."""
    return isinstance(path, (str, bytes, os.PathLike))


def spec_of(path):
    """The string the engine opens for ``path`` (bytes decoded as os.fsdecode
    does; the engine encodes it back to the same bytes); TypeError for anything else."""
    if is_path(path):
        return os.fsdecode(path)
    raise TypeError(f"expected a path or URL (str, bytes or os.PathLike), got {type(path).__name__}")


def is_url(spec):
    """Whether the engine reads ``spec`` over the network (http, https, s3)."""
    return spec.startswith(("http://", "https://", "s3://"))

"""What a path argument may be: a local path (str, bytes or os.PathLike, as
the operating system takes it: a str from os.fsdecode of bytes that are not
UTF-8 names those bytes), a URL of a scheme the engine knows (http(s)://,
s3://, ...), or a sharded ``*.index.json``, local or remote."""

import os

from ._ringsafe import is_url  # noqa: F401 - the engine's rule, the one home of URL detection


def is_path(path):
    """Whether ``path`` is something spec_of() takes."""
    return isinstance(path, (str, bytes, os.PathLike))


def spec_of(path):
    """The string the engine opens for ``path`` (bytes decoded as os.fsdecode
    does; the engine encodes it back to the same bytes); TypeError for anything else."""
    if is_path(path):
        return os.fsdecode(path)
    raise TypeError(f"expected a path or URL (str, bytes or os.PathLike), got {type(path).__name__}")

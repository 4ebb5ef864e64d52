"""What a path argument may be: a local path (str or os.PathLike), an
http(s):// or s3:// URL, or a sharded ``*.index.json``, local or remote."""

import os


def spec_of(path):
    """The string the engine opens for ``path``; TypeError for anything else."""
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    raise TypeError(f"expected a path or URL (str or os.PathLike), got {type(path).__name__}")


def is_url(spec):
    """Whether the engine reads ``spec`` over the network (http, https, s3)."""
    return spec.startswith(("http://", "https://", "s3://"))

"""What a path argument may be: a local path (str or os.PathLike), a URL
of a scheme the engine knows (http(s)://, s3://, hf://, ...), or a sharded
``*.index.json``, local or remote."""

import os

from ._ringsafe import is_url  # noqa: F401 - the engine's rule, the one home of URL detection


def spec_of(path):
    """The string the engine opens for ``path``; TypeError for anything else."""
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    raise TypeError(f"expected a path or URL (str or os.PathLike), got {type(path).__name__}")

"""The package's errors, one model with the engine's: SafetensorError (the
binding's, with ``.kind`` naming the engine's errc), ``error()`` for those
found on the Python side, and SliceIndexError for get_slice's indexes."""

from ._ringsafe import SafetensorError, without_url_secrets


def error(kind, message):
    """A SafetensorError with .kind, for errors found on the Python side; its
    message shown as the engine's are (a URL's signing values written "...")."""
    e = SafetensorError(without_url_secrets(message))
    e.kind = kind
    return e


class SliceIndexError(SafetensorError, IndexError):
    """An index get_slice cannot take (out of bounds, too many, a mask): an
    IndexError, as the reference's torch slices raise, and a SafetensorError,
    as its NumPy slices raise, so code written for either catches it."""

    kind = "InvalidArgument"
    whole: bool  # set on an index get_slice reads whole (_index._needs_whole)
    out_of_range: bool = False  # an int past a dimension's end, or more entries than dimensions

"""Which tensors a call takes: ``select=`` is None (all), a name or glob, or a
list of names and globs. Exact names must exist (TensorNotFound); a glob
matching nothing selects nothing. Globs are fnmatch without flags (``*`` also
crosses dots)."""

from ._errors import error

_GLOB_CHARS = set("*?[\\")


def is_glob(pattern):
    return any(c in _GLOB_CHARS for c in pattern)


def not_found(name, where):
    """The TensorNotFound error for a name that ``where`` (a path, URL or file
    object's name) does not hold, in the engine's words."""
    return error("TensorNotFound", f"tensor '{name}' not found in {where}")


def resolve(reader, data_order, select):
    """Selected names in data order. ``data_order`` lists every name in data
    order; ``reader`` is a Reader or a source with the same select_glob(globs)
    (matching names in data order) and select(names) (TensorNotFound naming
    the first missing name)."""
    if select is None:
        return list(data_order)
    items = [select] if isinstance(select, str) else list(select)
    for s in items:
        if not isinstance(s, str):
            raise TypeError(f"select= takes names or glob patterns (str), got {type(s).__name__}")
    exact = [s for s in items if not is_glob(s)]
    globs = [s for s in items if is_glob(s)]
    chosen = set(reader.select_glob(globs)) if globs else set()
    if exact:
        reader.select(list(dict.fromkeys(exact)))  # raises TensorNotFound naming the first missing name
        chosen.update(exact)
    return [n for n in data_order if n in chosen]

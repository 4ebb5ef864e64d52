"""get_slice() indexing: turns a NumPy-style index (ints, slices with any
step, Ellipsis, None, lists of ints) into the smallest box of the tensor to
read, and the index that picks the result out of that box."""

import operator
from collections import namedtuple
from typing import Any

from ._dtypes import SliceIndexError

# box: [(start, stop)] per dimension; relative: the index applied to the box read
# into memory; flips: box dimensions to reverse first (negative steps); last: the
# relative entry of the last dimension (slice(None) under an Ellipsis; None if 0-d).
IndexPlan = namedtuple("IndexPlan", "box relative flips last")


_COVERED = object()  # a dimension an Ellipsis stands for


def _array_dims(x):
    """The number of dimensions of a NumPy array or torch tensor, else 0."""
    ndim = getattr(x, "ndim", None)
    return ndim if isinstance(ndim, int) and not isinstance(x, (int, bool)) else 0


def _as_list(x):
    """A 1-d NumPy array or torch tensor of ints as a list; 0-d ones stay scalars
    (they have __index__); boolean and multi-dimensional ones raise SliceIndexError."""
    dims = _array_dims(x)
    if dims == 0:
        return x
    kind = str(getattr(x, "dtype", ""))
    if "bool" in kind:
        raise _needs_whole("boolean masks are not supported by get_slice: index with ints, "
                           "slices or lists of ints")
    if dims > 1:
        raise _needs_whole(f"a {dims}-d index array is not supported by get_slice: "
                           "index each dimension with an int, a slice or a 1-d list of ints")
    if "int" not in kind:
        raise SliceIndexError(f"index arrays must hold integers, got dtype {kind}")
    return x.tolist()


def _needs_whole(message):
    """An index the box planner cannot take (a boolean mask, a nested list, a
    multi-dimensional index array): get_slice then indexes the whole tensor
    with the framework's own indexing (``.whole``)."""
    e = SliceIndexError(message)
    e.whole = True
    return e


def _dim_error(i, dim, size):
    return SliceIndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")


def plan_index(index, shape):
    """Returns the IndexPlan of ``index`` on a tensor of ``shape``: the box to
    read and what picks the result out of it (see IndexPlan)."""
    if not isinstance(index, tuple):
        index = (index,)
    used = sum(1 for x in index if x is not None and x is not Ellipsis)
    if sum(1 for x in index if x is Ellipsis) > 1:
        raise SliceIndexError("an index can only have a single ellipsis ('...')")
    if used > len(shape):
        raise SliceIndexError(f"too many indices for tensor of dimension {len(shape)}")
    # The dimensions an Ellipsis stands for are read whole and stay an Ellipsis in
    # the relative index: even when it stands for none, NumPy counts advanced
    # indexes on both sides of it as separated (their dimension goes first).
    covered = len(shape) - used
    expanded = []
    for x in index:
        expanded.extend([_COVERED] * covered if x is Ellipsis else [x])
    if not any(x is Ellipsis for x in index):
        expanded.extend([_COVERED] * covered)
    expanded = [_as_list(x) for x in expanded]
    relative: list[Any]
    last: Any
    box, relative, flips, last = [], [], [], None
    dim = 0
    for x in expanded:
        if x is not None and dim == len(shape) - 1:
            last = len(relative)  # where the last dimension's entry goes
        if x is _COVERED:
            box.append((0, shape[dim]))
            relative.append(_COVERED)
            dim += 1
            continue
        if x is None:
            relative.append(None)
            continue
        size = shape[dim]
        if isinstance(x, slice):
            start, stop, step = x.indices(size)
            picked = range(start, stop, step)
            if len(picked) == 0:
                box.append((0, 0))
                relative.append(slice(0, 0))
            elif step > 0:
                lo = picked[0]
                box.append((lo, picked[-1] + 1))
                # a step past the box picks one element; clamp it (torch refuses steps >= 2^63)
                relative.append(slice(0, picked[-1] + 1 - lo, min(step, picked[-1] + 1 - lo)))
            else:
                lo, hi = picked[-1], picked[0] + 1
                box.append((lo, hi))
                flips.append(dim)
                relative.append(slice(0, hi - lo, min(-step, hi - lo)))  # on the reversed box
        elif isinstance(x, (list, tuple)) or hasattr(x, "__index__") and not isinstance(x, bool):
            if isinstance(x, (list, tuple)):
                if any(isinstance(i, (list, tuple)) or _array_dims(i) for i in x):
                    raise _needs_whole(f"nested index lists are not supported by get_slice (dimension {dim}): "
                                       "index each dimension with an int, a slice or a flat list of ints")
                if not x:
                    box.append((0, 0))
                    relative.append([])
                    dim += 1
                    continue
                if any(isinstance(i, (bool,)) or type(i).__name__ == "bool_" for i in x):
                    raise _needs_whole("boolean masks are not supported by get_slice: index with ints, "
                                       "slices or lists of ints")
                ints = [operator.index(i) for i in x]
            else:
                i = operator.index(x)
                if i < -size or i >= size:
                    raise _dim_error(i, dim, size)
                i %= size
                box.append((i, i + 1))
                relative.append(0)
                dim += 1
                continue
            for i in ints:
                if i < -size or i >= size:
                    raise _dim_error(i, dim, size)
            ints = [i % size for i in ints]
            lo = min(ints)
            box.append((lo, max(ints) + 1))
            relative.append([i - lo for i in ints])
        else:
            raise TypeError(f"unsupported index {x!r}: use ints, slices, lists of ints, ... or None")
        dim += 1
    if last is not None:
        last = slice(None) if relative[last] is _COVERED else relative[last]
    if any(x is Ellipsis for x in index):  # the covered run (maybe empty) becomes one Ellipsis
        at = next(i for i, x in enumerate(index) if x is Ellipsis)  # one relative entry per index entry before it
        relative = [x for x in relative if x is not _COVERED]
        relative.insert(at, Ellipsis)
    else:  # trailing dimensions read whole
        relative = [slice(None) if x is _COVERED else x for x in relative]
    return IndexPlan(box, tuple(relative), flips, last)

"""get_slice() indexing: turns a NumPy-style index (ints, slices with any
step, Ellipsis, None, lists of ints) into the smallest box of the tensor to
read, and the index that picks the result out of that box."""

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import SliceIndexError


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """What plan_index makes of an index: ``box``, [(start, stop)] per dimension;
    ``relative``, the index applied to the box read into memory; ``flips``, the
    box dimensions to reverse first (negative steps); ``last``, the relative
    entry of the last dimension (slice(None) under an Ellipsis; None if 0-d)."""

    box: list[tuple[int, int]]
    relative: tuple[Any, ...]
    flips: list[int]
    last: Any


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
    """Torch's and NumPy's text for an int out of range (numpy_reference_error: the reference's NumPy slices')."""
    e = SliceIndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
    e.out_of_range = True
    return e


def _expand(index, shape):
    """``index`` (a tuple) with one entry per dimension of ``shape`` (and each
    None): the dimensions an Ellipsis stands for, or that no entry names, as
    _COVERED; index arrays as lists."""
    used = sum(1 for x in index if x is not None and x is not Ellipsis)
    if sum(1 for x in index if x is Ellipsis) > 1:
        raise SliceIndexError("an index can only have a single ellipsis ('...')")
    if used > len(shape):
        e = SliceIndexError(f"too many indices for tensor of dimension {len(shape)}")
        e.out_of_range = True
        raise e
    # The dimensions an Ellipsis stands for are read whole and stay an Ellipsis in
    # the relative index: even when it stands for none, NumPy counts advanced
    # indexes on both sides of it as separated (their dimension goes first).
    covered = len(shape) - used
    expanded = []
    for x in index:
        expanded.extend([_COVERED] * covered if x is Ellipsis else [x])
    if not any(x is Ellipsis for x in index):
        expanded.extend([_COVERED] * covered)
    return [_as_list(x) for x in expanded]


def _slice_entry(x, size):
    """(box entry, relative entry, flipped) of a slice on a dimension of ``size``."""
    start, stop, step = x.indices(size)
    picked = range(start, stop, step)
    if len(picked) == 0:
        return (0, 0), slice(0, 0), False
    if step > 0:
        lo = picked[0]
        # a step past the box picks one element; clamp it (torch refuses steps >= 2^63)
        return (lo, picked[-1] + 1), slice(0, picked[-1] + 1 - lo, min(step, picked[-1] + 1 - lo)), False
    lo, hi = picked[-1], picked[0] + 1
    return (lo, hi), slice(0, hi - lo, min(-step, hi - lo)), True  # relative to the reversed box


def _int_entry(x, dim, size):
    """(box entry, relative entry) of an int or a flat list of ints on dimension ``dim`` of ``size``."""
    if not isinstance(x, (list, tuple)):
        i = operator.index(x)
        if i < -size or i >= size:
            raise _dim_error(i, dim, size)
        i %= size
        return (i, i + 1), 0
    if any(isinstance(i, (list, tuple)) or _array_dims(i) for i in x):
        raise _needs_whole(f"nested index lists are not supported by get_slice (dimension {dim}): "
                           "index each dimension with an int, a slice or a flat list of ints")
    if not x:
        return (0, 0), []
    if any(isinstance(i, (bool,)) or type(i).__name__ == "bool_" for i in x):
        raise _needs_whole("boolean masks are not supported by get_slice: index with ints, "
                           "slices or lists of ints")
    ints = [operator.index(i) for i in x]
    for i in ints:
        if i < -size or i >= size:
            raise _dim_error(i, dim, size)
    ints = [i % size for i in ints]
    lo = min(ints)
    return (lo, max(ints) + 1), [i - lo for i in ints]


def _relative_index(index, relative):
    """The relative entries as the index applied to the box: the covered run
    (maybe empty) becomes one Ellipsis where ``index`` had it, else slices."""
    if any(x is Ellipsis for x in index):
        at = next(i for i, x in enumerate(index) if x is Ellipsis)  # one relative entry per index entry before it
        relative = [x for x in relative if x is not _COVERED]
        relative.insert(at, Ellipsis)
    else:  # trailing dimensions read whole
        relative = [slice(None) if x is _COVERED else x for x in relative]
    return tuple(relative)


def plan_index(index: Any, shape: Sequence[int], framework: str = "pt") -> IndexPlan:
    """Returns the IndexPlan of ``index`` on a tensor of ``shape``: the box to
    read and what picks the result out of it (see IndexPlan). An index out of
    range, or with more entries than dimensions, raises SliceIndexError in the
    words of the reference's slices of ``framework``: torch's own ("pt",
    torch_reference_error), the reference's NumPy slices' ("np",
    numpy_reference_error)."""
    given = index
    if not isinstance(index, tuple):
        index = (index,)
    try:
        return _plan(index, shape)
    except SliceIndexError as e:
        if not getattr(e, "out_of_range", False):
            raise
        words = numpy_reference_error(index, shape) if framework == "np" else torch_reference_error(given, shape)
        if words is None:
            raise
        raise words from None


def torch_reference_error(index, shape):
    """The SliceIndexError torch raises for ``index`` (as given) on a tensor of
    ``shape`` (the reference's torch slices index the tensor with torch), asked
    of a meta tensor (no memory); None when torch raises none there (an index
    list on a meta tensor is not checked)."""
    import torch
    try:
        torch.empty(shape, device="meta")[index]
    except IndexError as e:
        return SliceIndexError(str(e))
    return None


def numpy_reference_error(index, shape):
    """The SliceIndexError the reference's NumPy slices raise for ``index`` (a
    tuple) on ``shape``, in their words and order: the first negative int below
    -size ("Invalid index -6 for dimension 1 of size 5"); else more entries than
    dimensions; else the last dimension with an int past its end ("Error during
    slicing [:, 5] with shape [1, 5]: index 5 out of bounds for tensor dimension
    #1 of size 5"), the index shown with each negative int wrapped and each
    dimension an Ellipsis stands for as ":"."""
    used = sum(1 for x in index if x is not None and x is not Ellipsis)
    entries: list = []  # what each shown entry is (a slice, None, an int or a list of them)
    dims: list[int] = []  # the dimension each entry that indexes one indexes
    for x in index:
        if x is Ellipsis:
            covered = max(len(shape) - used, 0)
            entries += [slice(None)] * covered
            dims += list(range(len(dims), len(dims) + covered))
        elif x is None:
            entries.append(None)
        else:
            entries.append(_as_list(x))
            dims.append(len(dims))
    at = iter(dims)
    located = [(x, None if x is None else next(at)) for x in entries]
    picks = [(x if isinstance(x, list) else [x], d) for x, d in located
             if d is not None and d < len(shape) and not isinstance(x, slice) and x is not None]
    for ints, d in picks:
        for i in ints:
            if operator.index(i) < -shape[d]:
                return SliceIndexError(f"Invalid index {operator.index(i)} for dimension {d} of size {shape[d]}")

    def shown(x, d):
        if isinstance(x, slice):
            text = ("" if x.start is None else str(x.start)) + ":" + ("" if x.stop is None else str(x.stop))
            return text + ("" if x.step is None else f":{x.step}")
        if x is None:
            return "None"
        size = shape[d] if d is not None and d < len(shape) else 0
        wrap = [operator.index(i) + size if operator.index(i) < 0 else operator.index(i)
                for i in (x if isinstance(x, list) else [x])]
        return str(wrap) if isinstance(x, list) else str(wrap[0])

    where = (f"Error during slicing [{', '.join(shown(x, d) for x, d in located)}] with shape "
             f"[{', '.join(map(str, shape))}]")
    if used > len(shape):
        return SliceIndexError(f"{where}: more slicing indexes than dimensions in tensor")
    for ints, d in reversed(picks):
        for i in ints:
            if operator.index(i) >= shape[d]:
                return SliceIndexError(f"{where}: index {operator.index(i)} out of bounds for tensor dimension "
                                       f"#{d} of size {shape[d]}")
    return SliceIndexError(f"{where}: out of bounds")  # not reached: an out-of-range index has one of the above


def _plan(index: tuple[Any, ...], shape: Sequence[int]) -> IndexPlan:
    """plan_index of a tuple ``index``, in torch's words."""
    box: list[Any] = []
    relative: list[Any] = []
    flips: list[int] = []
    last: Any = None
    dim = 0
    for x in _expand(index, shape):
        if x is not None and dim == len(shape) - 1:
            last = len(relative)  # where the last dimension's entry goes
        if x is None:
            relative.append(None)
            continue
        if x is _COVERED:
            b, r = (0, shape[dim]), _COVERED
        elif isinstance(x, slice):
            b, r, flipped = _slice_entry(x, shape[dim])
            if flipped:
                flips.append(dim)
        elif isinstance(x, (list, tuple)) or hasattr(x, "__index__") and not isinstance(x, bool):
            b, r = _int_entry(x, dim, shape[dim])
        else:
            raise TypeError(f"unsupported index {x!r}: use ints, slices, lists of ints, ... or None")
        box.append(b)
        relative.append(r)
        dim += 1
    if last is not None:
        last = slice(None) if relative[last] is _COVERED else relative[last]
    return IndexPlan(box, _relative_index(index, relative), flips, last)

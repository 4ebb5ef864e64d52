"""The planning stage of ``ringsafe.distributed``: from the checkpoint's header and
every rank's needs, which rank fetches which bytes, in which batch, and how each
piece reaches the ranks that need it.

Pure computation, the same on every rank: no ``torch.distributed`` calls and no
I/O. ``plan`` is deterministic in its arguments, so the ranks agree on it
without exchanging it.
"""

import math
from typing import Any

from ._dtypes import BITS
from ._errors import error
from ._memory import aligned
from ._selection import is_glob
from ._torch_adapter import ADAPTER

_DIRECT_MIN = 1 << 20      # pieces every rank needs, at least this large: one broadcast each
_BALANCE_SLACK = 0.02      # a share may pass its quota by this fraction to keep a tensor whole

_SKIP, _LOCAL, _BCAST1, _BCASTP, _A2A = range(5)


# ---------------------------------------------------------------- geometry

def _prod(xs):
    """The product of ``xs`` (1 when empty)."""
    p = 1
    for x in xs:
        p *= x
    return p


class _Tensor:
    """A checkpoint tensor as the planner sees it: its TensorInfo (``info``),
    element geometry (a scalar is one element of shape [1]) and its place in
    data order."""

    __slots__ = ("info", "eshape", "bits", "granule", "order")

    def __init__(self, info, order):
        self.info = info  # the reader's TensorInfo: name, dtype, shape, where its bytes are
        self.eshape = list(info.shape) if info.shape else [1]
        self.bits = BITS[info.dtype]
        self.granule = 8 // math.gcd(self.bits, 8)  # elements per whole byte along the last dimension
        self.order = order

    def full(self):
        """The box of the whole tensor."""
        return [(0, n) for n in self.eshape]

    def nbytes(self, box):
        """The bytes ``box`` holds."""
        return _prod(e - s for s, e in box) * self.bits // 8

    def byte_box(self, box):
        """``box`` with its last dimension in bytes: the box in a uint8 view of the tensor."""
        s, e = box[-1]
        return list(box[:-1]) + [(s * self.bits // 8, e * self.bits // 8)]

    def engine_box(self, box):
        """``box`` as the engine's reads take it (none for a scalar)."""
        return list(box) if self.info.shape else []

    def flat_span(self, box):
        """(first, stop): the flat element indices the box spans, stop exclusive."""
        strides = [_prod(self.eshape[i + 1:]) for i in range(len(self.eshape))]
        first = sum(s * st for (s, _), st in zip(box, strides))
        last = sum((e - 1) * st for (_, e), st in zip(box, strides))
        return first, last + 1


def _intersect(a, b):
    """The box two boxes share, or None when they share nothing."""
    out = []
    for (s1, e1), (s2, e2) in zip(a, b):
        s, e = max(s1, s2), min(e1, e2)
        if s >= e:
            return None
        out.append((s, e))
    return out


def _slices(inner, outer):
    """Slices that pick box ``inner`` out of a tensor holding box ``outer``."""
    return tuple(slice(s - o, e - o) for (s, e), (o, _) in zip(inner, outer))


def _flat_interval(box, eshape):
    """(start, stop) flat indices when the box is one contiguous run of the tensor, else None."""
    d = 0
    while d < len(box) - 1 and box[d][1] - box[d][0] == 1:
        d += 1
    if any(box[i] != (0, eshape[i]) for i in range(d + 1, len(box))):
        return None
    stride = [_prod(eshape[i + 1:]) for i in range(len(eshape))]
    start = sum(box[i][0] * stride[i] for i in range(len(box)))
    return start, start + _prod(e - s for s, e in box)


def _flat_boxes(a, b, extents):
    """Boxes (relative to a region of these extents) covering its flat elements [a, b) in C order."""
    if a >= b:
        return []
    if len(extents) == 1:
        return [[(a, b)]]
    inner = _prod(extents[1:])
    i0, r0 = divmod(a, inner)
    i1, r1 = divmod(b, inner)
    if i0 == i1:
        return [[(i0, i0 + 1)] + s for s in _flat_boxes(r0, r1, extents[1:])]
    out = []
    if r0:
        out += [[(i0, i0 + 1)] + s for s in _flat_boxes(r0, inner, extents[1:])]
        i0 += 1
    if i1 > i0:
        out.append([(i0, i1)] + [(0, n) for n in extents[1:]])
    if r1:
        out += [[(i1, i1 + 1)] + s for s in _flat_boxes(0, r1, extents[1:])]
    return out


# ---------------------------------------------------------------- what a rank needs

def _box_of(spec, t, rank, world):
    """The element box a shard spec gives this rank for tensor ``t``."""
    name, shape = t.info.name, list(t.info.shape)
    if spec is None:
        return t.full()
    if isinstance(spec, bool):
        raise TypeError(f"shard= for tensor '{name}': expected a dimension (int), a box or None, got a bool")
    if isinstance(spec, int):
        if not shape:
            raise error("InvalidArgument", f"shard= splits tensor '{name}' along dimension {spec}, but it is a scalar")
        d = spec + len(shape) if spec < 0 else spec
        if not 0 <= d < len(shape):
            raise error("InvalidArgument", f"shard= splits tensor '{name}' (shape {shape}) along dimension {spec}, "
                                           f"which it does not have")
        g = t.granule if d == len(shape) - 1 else 1
        units = shape[d] // g
        q, r = divmod(units, world)
        start = (rank * q + min(rank, r)) * g
        stop = start + (q + (1 if rank < r else 0)) * g
        box = t.full()
        box[d] = (start, stop)
        return box
    try:
        items = list(spec)
    except TypeError:
        raise TypeError(f"shard= for tensor '{name}': expected a dimension (int), a box (a list of (start, stop) "
                        f"pairs or slices) or None, got {type(spec).__name__}") from None
    if len(items) > len(shape):
        raise error("InvalidArgument", f"shard= gives tensor '{name}' (shape {shape}) a box of {len(items)} "
                                       f"dimensions: {items}")
    box = t.full()
    for d, item in enumerate(items):
        n = shape[d]
        if isinstance(item, slice):
            s, e, step = item.indices(n)
            if step != 1:
                raise error("InvalidArgument",
                            f"shard= for tensor '{name}': a box takes slices with step 1, got {item}")
            e = max(s, e)
        else:
            try:
                s, e = item
                s, e = int(s), int(e)
            except (TypeError, ValueError):
                raise TypeError(f"shard= for tensor '{name}': a box is a list of (start, stop) pairs or slices, "
                                f"got {item!r}") from None
            if not 0 <= s <= e <= n:
                raise error("InvalidArgument", f"shard= for tensor '{name}' (shape {shape}): ({s}, {e}) is not "
                                               f"within dimension {d} of size {n}")
        box[d] = (s, e)
    if shape and t.granule > 1:
        s, e = box[-1]
        if s % t.granule or e % t.granule:
            raise error("InvalidArgument", f"shard= for tensor '{name}' ({t.info.dtype}): the last dimension of a box "
                                           f"must start and stop on whole bytes, got ({s}, {e})")
    return box


def _shard_lookup(shard):
    """A function (tensor) -> spec for shard=None, a dict of names/globs, or a callable(name, shape)."""
    if shard is None:
        return lambda t: None
    if callable(shard):
        return lambda t: shard(t.info.name, list(t.info.shape))
    if isinstance(shard, dict):
        exact = {k: v for k, v in shard.items() if not is_glob(k)}
        globs = [(k, v) for k, v in shard.items() if is_glob(k)]
        import fnmatch

        def look(t):
            if t.info.name in exact:
                return exact[t.info.name]
            for pattern, v in globs:
                if fnmatch.fnmatchcase(t.info.name, pattern):
                    return v
            return None
        return look
    raise TypeError(f"shard= takes None, a dict {{name or glob: dim or box}} or a callable(name, shape), "
                    f"got {type(shard).__name__}")


def _torch_shape(t, box):
    """The torch dtype and shape of the tensor holding ``box`` of ``t``."""
    extents = [e - s for s, e in box] if t.info.shape else []
    return ADAPTER._type(t.info.dtype, extents, t.info.name)


def _needs(reader, by_name, names, *, shard, rank, world):
    """{name: element box} of what this rank needs, validated before any I/O."""
    look = _shard_lookup(shard)
    out = {}
    for n in names:
        t = by_name[n]
        ADAPTER.check_dtype(t.info.dtype, t.info.shape, n)
        box = _box_of(look(t), t, rank, world)
        _torch_shape(t, box)
        out[n] = box
    return out


def _image_layout(tensors, needs):
    """({name: offset}, size) placing every tensor as the files' data sections hold them
    (shards one after another, 64-byte aligned), when this rank needs every tensor whole
    and each lands aligned for its dtype; else None."""
    if len(needs) != len(tensors) or any(needs[t.info.name] != t.full() for t in tensors):
        return None
    ends: dict[int, int] = {}
    for t in tensors:
        ends[t.info.shard] = max(ends.get(t.info.shard, 0), t.info.end)
    starts, size = {}, 0
    for shard in sorted(ends):
        starts[shard] = size
        size = aligned(size + ends[shard])
    offsets = {}
    for t in tensors:
        off = starts[t.info.shard] + t.info.begin
        item = _torch_shape(t, t.full())[0].itemsize if t.info.end > t.info.begin else 1
        if off % item:
            return None
        offsets[t.info.name] = off
    return offsets, size


# ---------------------------------------------------------------- the plan

class _Unit:
    """A box of one tensor fetched by one rank, with what each rank needs of it."""

    __slots__ = ("t", "box", "owner", "nbytes", "inters", "mode", "key")

    def __init__(self, t, box, owner, *, needs, world, key):
        self.t, self.box, self.owner, self.key = t, box, owner, key
        self.nbytes = t.nbytes(box)
        self.inters = {}
        for r in range(world):
            b = needs[r].get(t.info.name)
            if b is not None:
                i = _intersect(box, b)
                if i is not None:
                    self.inters[r] = i
        if world > 1 and len(self.inters) == world and all(i == box for i in self.inters.values()):
            self.mode = _BCAST1 if self.nbytes >= _DIRECT_MIN else _BCASTP
        elif any(r != owner for r in self.inters):
            self.mode = _A2A
        elif owner in self.inters:
            self.mode = _LOCAL
        else:
            self.mode = _SKIP


class _Batch:
    """One step of the plan: the units every rank fetches in it, sorted by how they
    are exchanged (``packed`` per owner, broadcast ``runs``, ``a2a``)."""

    def __init__(self, units, world, image):
        self.units = units
        if image:  # every rank's destination is an image of the data: no packing needed
            for u in units:
                if u.mode == _BCASTP:
                    u.mode = _BCAST1
        self.packed = [[u for u in units if u.owner == o and u.mode == _BCASTP] for o in range(world)]
        self.packed_size = [sum(u.nbytes for u in p) for p in self.packed]
        # Pieces every rank needs whole, one broadcast per run: with images, a run is each
        # owner's pieces that follow each other in a file; otherwise one piece.
        self.runs: list[list[_Unit]] = []
        for u in units:
            if u.mode != _BCAST1:
                continue
            if image and self.runs:
                prev = self.runs[-1][-1]
                if prev.owner == u.owner and _file_bytes(prev)[0] == _file_bytes(u)[0] \
                        and _file_bytes(prev)[2] == _file_bytes(u)[1]:
                    self.runs[-1].append(u)
                    continue
            self.runs.append([u])
        self.a2a = [u for u in units if u.mode == _A2A]


def _file_bytes(u):
    """(shard, first byte, end byte) of a unit within its shard's data section."""
    first, stop = u.t.flat_span(u.box)
    return u.t.info.shard, u.t.info.begin + first * u.t.bits // 8, u.t.info.begin + (stop * u.t.bits + 7) // 8


def _segments(tensors, needs, world):
    """(tensor, region, a, b, preferred rank or None) in data order: flat element
    ranges [a, b) of a region box that some rank needs."""
    out = []
    for t in tensors:
        boxes = {r: needs[r][t.info.name] for r in range(world)
                 if t.info.name in needs[r] and t.nbytes(needs[r][t.info.name]) > 0}
        if not boxes:
            continue
        flats = {r: _flat_interval(b, t.eshape) for r, b in boxes.items()}
        if all(f is not None for f in flats.values()):
            region = t.full()
            cuts = sorted({x for f in flats.values() for x in f})
            pieces: list[list[Any]] = []
            for a, b in zip(cuts, cuts[1:]):
                cover = [r for r, (s, e) in flats.items() if s <= a and b <= e]
                if cover:
                    pref = cover[0] if len(cover) == 1 else None
                    if pieces and pieces[-1][1] == a and pieces[-1][2] == pref:
                        pieces[-1][1] = b
                    else:
                        pieces.append([a, b, pref])
            out += [(t, region, a, b, pref) for a, b, pref in pieces]
        else:
            region = [(min(b[d][0] for b in boxes.values()), max(b[d][1] for b in boxes.values()))
                      for d in range(len(t.eshape))]
            pref = next(iter(boxes)) if len(boxes) == 1 else None
            out.append((t, region, 0, _prod(e - s for s, e in region), pref))
    return out


def _assign(segments, world):
    """Balanced, disjoint shares: per rank a list of (tensor, region, a, b) in data order.
    Each share ends within max(slack, half an element) of the quota, the slack
    being what keeps tensors whole."""
    def nbytes(t, a, b):
        return (b - a) * t.bits // 8

    def cut(t, a, b, budget):
        """Elements of [a, b) nearest ``budget`` bytes, whole bytes along the last dimension."""
        units = round(budget * 8 / (t.bits * t.granule))
        return min(max(units * t.granule, 0), b - a)

    total = sum(nbytes(t, a, b) for t, _, a, b, _ in segments)
    quota = total / world
    slack = quota * _BALANCE_SLACK
    loads = [0] * world
    shares: list[list[tuple[_Tensor, list[tuple[int, int]], int, int]]] = [[] for _ in range(world)]

    def give(r, t, region, *, a, b):
        """Flat elements [a, b) of ``region`` of ``t`` to rank ``r``."""
        shares[r].append((t, region, a, b))
        loads[r] += nbytes(t, a, b)

    pool = []
    # What only one rank needs goes to that rank, up to its quota.
    for t, region, a, b, pref in segments:
        if pref is None:
            pool.append((t, region, a, b))
            continue
        room = quota - loads[pref]
        n = b - a if nbytes(t, a, b) <= room + slack else cut(t, a, b, room)
        if n > 0:
            give(pref, t, region, a=a, b=a + n)
        if a + n < b:
            pool.append((t, region, a + n, b))
    # The rest in data order: each rank in turn filled to its quota (contiguous shares).
    pool.sort(key=lambda s: (s[0].order, s[2]))
    r = 0
    for t, region, a, b in pool:
        while a < b:
            while r < world and loads[r] >= quota - slack:
                r += 1
            if r < world:
                dst, room = r, quota - loads[r]
                n = b - a if nbytes(t, a, b) <= room + slack else cut(t, a, b, room)
                if n <= 0:
                    r += 1
                    continue
            else:  # every share is full to within the slack: top up the lightest
                dst = min(range(world), key=lambda i: loads[i])
                room = quota + slack - loads[dst]
                n = b - a if nbytes(t, a, b) <= room else max(cut(t, a, b, room), min(t.granule, b - a))
            give(dst, t, region, a=a, b=a + n)
            a += n
    for s in shares:
        s.sort(key=lambda p: (p[0].order, p[2]))
    return shares


def _chunks(share, limit):
    """A rank's share cut into consecutive chunks of at most ``limit`` bytes."""
    cur: list[Any]
    out, cur, used = [], [], 0
    for t, region, a, b in share:
        while a < b:
            room = limit - used
            n = room * 8 // t.bits
            n -= n % t.granule
            n = min(n, b - a)
            if n <= 0 and not cur:
                n = min(t.granule, b - a)  # one element larger than the limit (only in tests' tiny limits)
            if n <= 0:
                out.append(cur)
                cur, used = [], 0
                continue
            cur.append((t, region, a, a + n))
            used += (n * t.bits) // 8
            a += n
    if cur:
        out.append(cur)
    return out


def plan(tensors, needs, *, world, batch_bytes, image=False):
    """The batches every rank runs: deterministic in its arguments. ``image``: every rank
    holds the data sections as they are in the files (pieces that follow each other in a
    file follow each other in memory, at the same offsets everywhere)."""
    shares = _assign(_segments(tensors, needs, world), world)
    chunks = [_chunks(s, batch_bytes) for s in shares]
    batches = []
    key = 0
    for k in range(max((len(c) for c in chunks), default=0)):
        units = []
        for owner in range(world):
            if k >= len(chunks[owner]):
                continue
            for t, region, a, b in chunks[owner][k]:
                extents = [e - s for s, e in region]
                for rel in _flat_boxes(a, b, extents):
                    box = [(s + o, e + o) for (s, e), (o, _) in zip(rel, region)]
                    units.append(_Unit(t, box, owner, needs=needs, world=world, key=key))
                    key += 1
        batches.append(_Batch(units, world, image))
    return batches

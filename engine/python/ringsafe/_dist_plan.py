"""The planning stage of ``ringsafe.distributed``: from the checkpoint's header and
every rank's needs, which rank fetches which bytes, in which batch, and how each
piece reaches the ranks that need it.

Pure computation, the same on every rank: no ``torch.distributed`` calls and no
I/O. ``plan`` is deterministic in its arguments, so the ranks agree on it
without exchanging it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from ._dtypes import BITS
from ._errors import error
from ._memory import aligned
from ._selection import is_glob

_DIRECT_MIN = 1 << 20      # pieces every rank needs, at least this large: one broadcast each
_BALANCE_SLACK = 0.02      # a share may pass its quota by this fraction to keep a tensor whole

# An element box: one (start, stop) per dimension (a scalar's: [(0, 1)]).
Box = list[tuple[int, int]]


class _Mode(IntEnum):
    """How a fetched unit reaches the ranks that need it."""

    SKIP = 0     # no rank needs it
    LOCAL = 1    # only the rank that fetched it
    BCAST1 = 2   # every rank, whole: a broadcast of its own
    BCASTP = 3   # every rank, whole, small: packed with its owner's others into one broadcast
    A2A = 4      # some ranks, or parts: the batch's all_to_all


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

    def __init__(self, info: Any, order: int) -> None:
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


def box_shape(t, box):
    """The shape of the part ``box`` of tensor ``t`` (a scalar's: [])."""
    return [e - s for s, e in box] if t.info.shape else []


def _needs(by_name: dict[str, _Tensor], names: list[str], *, shard: Any, rank: int, world: int,
           check: Callable[[str, Any, str], object]) -> dict[str, Box]:
    """{name: element box} of what this rank needs, validated before any I/O:
    ``check(dtype, shape, name)``, the front end's framework check (it raises
    for a dtype or shape the framework cannot hold), runs on each tensor's
    whole shape, then on its box's."""
    look = _shard_lookup(shard)
    out = {}
    for n in names:
        t = by_name[n]
        check(t.info.dtype, t.info.shape, n)
        box = _box_of(look(t), t, rank, world)
        check(t.info.dtype, box_shape(t, box), n)
        out[n] = box
    return out


@dataclass(frozen=True)
class _ImageLayout:
    """Every tensor placed as the files' data sections hold them: ``offsets``
    {name: byte offset} in one buffer of ``size`` bytes (shards one after another,
    64-byte aligned)."""

    offsets: dict[str, int]
    size: int


def _image_layout(tensors: list[_Tensor], needs: dict[str, Box]) -> _ImageLayout | None:
    """The _ImageLayout of ``tensors`` when this rank needs every tensor whole and
    each lands aligned for its elements (packed dtypes: bytes); else None."""
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
        item = max(1, t.bits // 8) if t.info.end > t.info.begin else 1  # F4: two per byte
        if off % item:
            return None
        offsets[t.info.name] = off
    return _ImageLayout(offsets, size)


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
        self.mode: _Mode
        if world > 1 and len(self.inters) == world and all(i == box for i in self.inters.values()):
            self.mode = _Mode.BCAST1 if self.nbytes >= _DIRECT_MIN else _Mode.BCASTP
        elif any(r != owner for r in self.inters):
            self.mode = _Mode.A2A
        elif owner in self.inters:
            self.mode = _Mode.LOCAL
        else:
            self.mode = _Mode.SKIP


class _Batch:
    """One step of the plan: the units every rank fetches in it, sorted by how they
    are exchanged (``packed`` per owner, broadcast ``runs``, ``a2a``)."""

    def __init__(self, units, world, image):
        self.units = units
        if image:  # every rank's destination is an image of the data: no packing needed
            for u in units:
                if u.mode == _Mode.BCASTP:
                    u.mode = _Mode.BCAST1
        self.packed = [[u for u in units if u.owner == o and u.mode == _Mode.BCASTP] for o in range(world)]
        self.packed_size = [sum(u.nbytes for u in p) for p in self.packed]
        # Pieces every rank needs whole, one broadcast per run: with images, a run is each
        # owner's pieces that follow each other in a file; otherwise one piece.
        self.runs: list[list[_Unit]] = []
        for u in units:
            if u.mode != _Mode.BCAST1:
                continue
            if image and self.runs:
                prev, span = _file_bytes(self.runs[-1][-1]), _file_bytes(u)
                if self.runs[-1][-1].owner == u.owner and prev.shard == span.shard and prev.end == span.first:
                    self.runs[-1].append(u)
                    continue
            self.runs.append([u])
        self.a2a = [u for u in units if u.mode == _Mode.A2A]


@dataclass(frozen=True)
class _FileSpan:
    """Where a unit's bytes lie: bytes [first, end) of shard ``shard``'s data section."""

    shard: int
    first: int
    end: int


def _file_bytes(u: _Unit) -> _FileSpan:
    """The _FileSpan of a unit within its shard's data section."""
    first, stop = u.t.flat_span(u.box)
    return _FileSpan(u.t.info.shard, u.t.info.begin + first * u.t.bits // 8,
                     u.t.info.begin + (stop * u.t.bits + 7) // 8)


@dataclass(frozen=True)
class _Piece:
    """Flat elements [a, b) (C order) of the box ``region`` of tensor ``t``."""

    t: _Tensor
    region: Box
    a: int
    b: int

    @property
    def nbytes(self) -> int:
        """The bytes the piece holds."""
        return (self.b - self.a) * self.t.bits // 8


@dataclass(frozen=True)
class _Segment:
    """A piece some rank needs, and ``pref``: the one rank that needs it, or None
    when several do."""

    piece: _Piece
    pref: int | None


def _segments(tensors: list[_Tensor], needs: list[dict[str, Box]], world: int) -> list[_Segment]:
    """The _Segments in data order: flat element ranges of a region box that some rank needs."""
    out: list[_Segment] = []
    for t in tensors:
        boxes = {r: needs[r][t.info.name] for r in range(world)
                 if t.info.name in needs[r] and t.nbytes(needs[r][t.info.name]) > 0}
        if not boxes:
            continue
        flats = {r: _flat_interval(b, t.eshape) for r, b in boxes.items()}
        if all(f is not None for f in flats.values()):
            region = t.full()
            cuts = sorted({x for f in flats.values() for x in f})
            mine: list[_Segment] = []
            for a, b in zip(cuts, cuts[1:]):
                cover = [r for r, f in flats.items() if f is not None and f[0] <= a and b <= f[1]]
                if cover:
                    pref = cover[0] if len(cover) == 1 else None
                    last = mine[-1] if mine else None
                    if last is not None and last.piece.b == a and last.pref == pref:
                        mine[-1] = replace(last, piece=replace(last.piece, b=b))  # one range, extended
                    else:
                        mine.append(_Segment(_Piece(t, region, a, b), pref))
            out += mine
        else:
            region = [(min(b[d][0] for b in boxes.values()), max(b[d][1] for b in boxes.values()))
                      for d in range(len(t.eshape))]
            pref = next(iter(boxes)) if len(boxes) == 1 else None
            out.append(_Segment(_Piece(t, region, 0, _prod(e - s for s, e in region)), pref))
    return out


def _assign(segments: list[_Segment], world: int) -> list[list[_Piece]]:
    """Balanced, disjoint shares: per rank a list of _Pieces in data order.
    Each share ends within max(slack, half an element) of the quota, the slack
    being what keeps tensors whole."""
    def cut(p: _Piece, budget: float) -> int:
        """Elements of the piece nearest ``budget`` bytes, whole bytes along the last dimension."""
        t = p.t
        units = round(budget * 8 / (t.bits * t.granule))
        return min(max(units * t.granule, 0), p.b - p.a)

    total = sum(s.piece.nbytes for s in segments)
    quota = total / world
    slack = quota * _BALANCE_SLACK
    loads = [0] * world
    shares: list[list[_Piece]] = [[] for _ in range(world)]

    def give(r: int, p: _Piece) -> None:
        """The piece to rank ``r``."""
        shares[r].append(p)
        loads[r] += p.nbytes

    pool: list[_Piece] = []
    # What only one rank needs goes to that rank, up to its quota.
    for seg in segments:
        p, pref = seg.piece, seg.pref
        if pref is None:
            pool.append(p)
            continue
        room = quota - loads[pref]
        n = p.b - p.a if p.nbytes <= room + slack else cut(p, room)
        if n > 0:
            give(pref, replace(p, b=p.a + n))
        if p.a + n < p.b:
            pool.append(replace(p, a=p.a + n))
    # The rest in data order: each rank in turn filled to its quota (contiguous shares).
    pool.sort(key=lambda p: (p.t.order, p.a))
    r = 0
    for p in pool:
        while p.a < p.b:
            while r < world and loads[r] >= quota - slack:
                r += 1
            if r < world:
                dst, room = r, quota - loads[r]
                n = p.b - p.a if p.nbytes <= room + slack else cut(p, room)
                if n <= 0:
                    r += 1
                    continue
            else:  # every share is full to within the slack: top up the lightest
                dst = min(range(world), key=lambda i: loads[i])
                room = quota + slack - loads[dst]
                n = p.b - p.a if p.nbytes <= room else max(cut(p, room), min(p.t.granule, p.b - p.a))
            give(dst, replace(p, b=p.a + n))
            p = replace(p, a=p.a + n)
    for share in shares:
        share.sort(key=lambda p: (p.t.order, p.a))
    return shares


def _chunks(share: list[_Piece], limit: int) -> list[list[_Piece]]:
    """A rank's share cut into consecutive chunks of at most ``limit`` bytes."""
    out: list[list[_Piece]] = []
    cur: list[_Piece] = []
    used = 0
    for p in share:
        t, a = p.t, p.a
        while a < p.b:
            room = limit - used
            n = room * 8 // t.bits
            n -= n % t.granule
            n = min(n, p.b - a)
            if n <= 0 and not cur:
                n = min(t.granule, p.b - a)  # one element larger than the limit (only in tests' tiny limits)
            if n <= 0:
                out.append(cur)
                cur, used = [], 0
                continue
            cur.append(replace(p, a=a, b=a + n))
            used += (n * t.bits) // 8
            a += n
    if cur:
        out.append(cur)
    return out


def plan(tensors: list[_Tensor], needs: list[dict[str, Box]], *, world: int, batch_bytes: int,
         image: bool = False) -> list[_Batch]:
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
            for p in chunks[owner][k]:
                extents = [e - s for s, e in p.region]
                for rel in _flat_boxes(p.a, p.b, extents):
                    box = [(s + o, e + o) for (s, e), (o, _) in zip(rel, p.region)]
                    units.append(_Unit(p.t, box, owner, needs=needs, world=world, key=key))
                    key += 1
        batches.append(_Batch(units, world, image))
    return batches

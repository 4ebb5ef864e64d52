"""safe_open(...).get_slice(name)[index] against NumPy's own indexing of the
whole array, on random shapes (1 to 4 dimensions, zero-size ones included) and
random NumPy-style indexes: ints (negative ones too, NumPy ints as well),
slices with start/stop/step (negative steps, out-of-range starts and stops),
Ellipsis, None, lists of ints, and tuples mixing them. Both frameworks: the
torch result is compared with NumPy's indexing of the same bytes, and with
torch's own indexing of the whole tensor where torch can index (no negative
steps). Where the two disagree (an int and a list apart from each other in one
index), the torch result follows torch.

Also: IndexError where NumPy raises it (out-of-range ints, too many indices,
two Ellipses), contiguous results that are independent of each other and of
the file, and a slice of leading rows reading only those rows (page-cache
residency after dropping the file's pages; skipped where that cannot be
measured).
"""

import ctypes
import math
import mmap
import os
import warnings

import numpy as np
import pytest
import ringsafe
import safetensors
import safetensors.numpy as snp
import safetensors.torch as spt
import torch
from conftest import evict, raw_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# (safetensors dtype, numpy dtype of the same bytes, torch dtype)
DTYPES = [
    ("U8", np.uint8, torch.uint8),
    ("I16", np.int16, torch.int16),
    ("F32", np.float32, torch.float32),
    ("F64", np.float64, torch.float64),
    ("C64", np.complex64, torch.complex64),
    ("BF16", np.uint16, torch.bfloat16),  # torch only; NumPy compares the raw 16-bit words
]


def _full_array(shape, np_dtype, seed):
    n = math.prod(shape) * np.dtype(np_dtype).itemsize
    data = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    return data.view(np_dtype).reshape(shape)


def _save(path, name, array, torch_dtype, framework):
    """Writes ``array``'s bytes as one tensor with the reference writer."""
    if framework == "np":
        snp.save_file({name: array}, str(path))
    else:
        t = torch.from_numpy(array.copy()) if array.size else torch.empty(array.shape, dtype=torch_dtype)
        if array.size:
            t = t.view(torch_dtype)
        spt.save_file({name: t}, str(path))


@st.composite
def _dim_index(draw, size):
    kind = draw(st.sampled_from(["int", "slice", "slice", "list"] if size else ["slice", "list"]))
    if kind == "int":
        i = draw(st.integers(-size, size - 1))
        return draw(st.sampled_from([int, np.int64]))(i)
    if kind == "slice":
        bound = st.one_of(st.none(), st.integers(-size - 3, size + 3))
        step = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2, -3])))
        return slice(draw(bound), draw(bound), step)
    if size == 0:
        return []
    return draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=3))


@st.composite
def indexes(draw, shape):
    """A valid NumPy index for ``shape``: explicit indexes for some leading
    dimensions, optionally an Ellipsis and explicit indexes for some trailing
    ones, Nones anywhere. At most one list, so that advanced indexing never
    broadcasts lists against each other."""
    ndim = len(shape)
    ellipsis = draw(st.booleans())
    before = draw(st.integers(0, ndim))
    after = draw(st.integers(0, ndim - before)) if ellipsis else 0
    dims = list(shape[:before]) + ([None] if ellipsis else []) + list(shape[ndim - after:])
    parts, has_list = [], False
    for size in dims:
        if size is None:
            parts.append(Ellipsis)
            continue
        p = draw(_dim_index(size))
        if isinstance(p, list):
            if has_list:
                p = slice(None)
            has_list = True
        parts.append(p)
    for _ in range(draw(st.integers(0, 2))):
        parts.insert(draw(st.integers(0, len(parts))), None)
    if len(parts) == 1 and draw(st.booleans()):
        return parts[0]  # a bare index, not a tuple
    return tuple(parts)


@st.composite
def cases(draw, min_dims=1):
    shape = draw(st.lists(st.integers(0, 6), min_size=min_dims, max_size=4))
    index = draw(indexes(shape))
    dtype = draw(st.sampled_from(DTYPES))
    return shape, index, dtype, draw(st.integers(0, 2**32 - 1))


def _expected(full, index):
    """NumPy's result as a C-contiguous array (0-d for a single element)."""
    r = np.asarray(full[index])
    return np.ascontiguousarray(r) if r.ndim else r


def _check(result, expected, framework, np_dtype):
    if framework == "np":
        assert isinstance(result, np.ndarray)
        assert result.dtype == np.dtype(np_dtype)
        assert result.shape == expected.shape
        assert result.flags.c_contiguous
        assert result.tobytes() == expected.tobytes()
    else:
        assert isinstance(result, torch.Tensor)
        assert tuple(result.shape) == expected.shape
        assert result.is_contiguous()
        assert raw_bytes(result) == expected.tobytes()


def _parts(index):
    return index if isinstance(index, tuple) else (index,)


def _int_and_list(index):
    """Whether an index mixes an int with a list: NumPy then treats the int as an
    advanced index too (which moves dimensions when the two are not adjacent),
    torch as a basic one."""
    parts = _parts(index)
    return any(isinstance(p, list) for p in parts) and any(isinstance(p, (int, np.integer)) for p in parts)


def _torch_can_index(index):
    """torch's own indexing has no negative steps."""
    return not any(isinstance(p, slice) and p.step is not None and p.step < 0 for p in _parts(index))


@SETTINGS
@pytest.mark.parametrize("framework", ["np", "pt"])
@given(case=cases())
def test_get_slice_equals_numpy_indexing(tmp_path, framework, case):
    shape, index, (st_dtype, np_dtype, torch_dtype), seed = case
    if framework == "np" and st_dtype == "BF16":
        st_dtype, np_dtype, torch_dtype = "U8", np.uint8, torch.uint8
    full = _full_array(shape, np_dtype, seed)
    expected = _expected(full, index)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch_dtype, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        s = f.get_slice("t")
        assert s.get_shape() == list(shape)
        assert s.get_dtype() == st_dtype
        result = s[index]
        if framework == "pt" and _torch_can_index(index):
            # The same as indexing the whole loaded tensor with torch.
            want = f.get_tensor("t")[index]
            assert tuple(result.shape) == tuple(want.shape)
            assert raw_bytes(result) == raw_bytes(want)
        if framework == "np" or not _int_and_list(index):
            _check(result, expected, framework, np_dtype)


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("index", [
    (slice(None, None, -1),), (slice(-1, None, -2), slice(None, None, -3)), (Ellipsis, slice(10, -10, -1)),
    (slice(-100, 100),), (slice(5, 2),), (slice(2, 2),), ([2, 0, 2, -1],), ([],), (None, Ellipsis, None),
    (slice(None), [4, 1]), (-1, slice(-1, None)), (-1, -1), (1, np.int64(-5)), (np.int64(2), slice(None, 3)),
    ([0, 2], slice(None, None, -1)), slice(1, None), 2, Ellipsis, [1, 0], (Ellipsis, 3), (), ([1, 2], 0),
    (slice(None), -5), (None, 2, slice(1, None, 2), None),
])
def test_get_slice_fixed_index_forms(tmp_path, framework, index):
    full = np.arange(3 * 5, dtype=np.int32).reshape(3, 5) * 7 - 11
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.int32, framework)
    expected = _expected(full, index)
    with ringsafe.safe_open(str(path), framework) as f:
        _check(f.get_slice("t")[index], expected, framework, np.int32)


@pytest.mark.parametrize("index", [(1, None, [0, 3]), (None, [0, 1], None, 0), (0, slice(None), [1, 2])])
def test_int_and_list_follow_each_framework(write_checkpoint, index):
    """Where NumPy and torch disagree (an int and a list apart from each other:
    NumPy moves the broadcast dimension first, torch indexes the int first),
    each framework's slice equals that framework's indexing of the whole tensor."""
    full = np.arange(3 * 4 * 5, dtype=np.int16).reshape(3, 4, 5)
    path = write_checkpoint({"t": full})
    with ringsafe.safe_open(str(path), "np") as f:
        _check(f.get_slice("t")[index], _expected(full, index), "np", np.int16)
    with ringsafe.safe_open(str(path), "pt") as f:
        want = torch.from_numpy(full)[index]
        got = f.get_slice("t")[index]
        assert got.shape == want.shape and torch.equal(got, want)
    assert np.asarray(full[index]).shape != tuple(want.shape)  # they do disagree here


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("index", [
    3, -4, (0, 5), (0, -6), ([0, 3],), ([-4],), (slice(None), [5]), (0, 0, 0), (Ellipsis, 0, 0, 0),
    (Ellipsis, Ellipsis), (None, 0, 0, 0),
])
def test_get_slice_raises_index_error_like_numpy(tmp_path, framework, index):
    full = np.arange(15, dtype=np.float32).reshape(3, 5)
    with pytest.raises(IndexError):
        full[index]
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        with pytest.raises(IndexError):
            f.get_slice("t")[index]
        # The handle still works after the error.
        _check(f.get_slice("t")[1:], full[1:], framework, np.float32)


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("make", [np.array, torch.tensor], ids=["ndarray", "tensor"])
def test_1d_int_arrays_index_like_lists(tmp_path, framework, make):
    full = np.arange(3 * 5, dtype=np.int32).reshape(3, 5)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.int32, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        s = f.get_slice("t")
        _check(s[make([2, 0])], full[[2, 0]], framework, np.int32)
        _check(s[:, make([4, -5, 1])], full[:, [4, -5, 1]], framework, np.int32)
        _check(s[make(1), make([3])], full[1, [3]], framework, np.int32)  # a 0-d array is an int


@pytest.mark.parametrize("index", [
    np.array([True, False, True]), torch.tensor([True, False, True]), np.array([[0, 1]]), [[0, 1], [1, 2]],
], ids=["np-mask", "torch-mask", "2-d", "nested"])
@pytest.mark.parametrize("framework", ["np", "pt"])
def test_masks_and_nested_indexes_index_the_whole_tensor_as_the_framework_does(tmp_path, index, framework):
    # The reference's torch slices take torch's whole indexing; so do ringsafe's (both frameworks).
    full = np.arange(15, dtype=np.float32).reshape(3, 5)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, framework)
    with warnings.catch_warnings():  # torch deprecates a nested list as a multi-dimensional index
        warnings.simplefilter("ignore")
        with ringsafe.safe_open(str(path), framework) as f:
            got = f.get_slice("t")[index]
        if framework == "pt":
            want = torch.from_numpy(full)[torch.from_numpy(index) if isinstance(index, np.ndarray) else index]
            assert torch.equal(got, want)
        else:
            want = full[index.numpy() if isinstance(index, torch.Tensor) else index]
            assert np.array_equal(got, want)
    if framework == "pt":
        with safetensors.safe_open(str(path), "pt") as ref, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.equal(got, ref.get_slice("t")[index])


def test_an_index_array_of_floats_raises_both_index_error_and_safetensor_error(tmp_path):
    full = np.arange(15, dtype=np.float32).reshape(3, 5)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, "pt")
    with ringsafe.safe_open(str(path), "pt") as f:
        with pytest.raises(IndexError, match="integers") as e:
            f.get_slice("t")[np.array([0.5])]
        assert isinstance(e.value, ringsafe.SafetensorError)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data())
def test_out_of_range_int_raises_index_error(tmp_path, shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    n = shape[dim]
    bad = data.draw(st.one_of(st.integers(n, n + 5), st.integers(-n - 5, -n - 1)))
    as_list = data.draw(st.booleans())
    index = (slice(None),) * dim + ([0, bad] if as_list and n else bad,)
    full = np.zeros(shape, dtype=np.float32)
    with pytest.raises(IndexError):
        full[index]
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, "np")
    for framework in ("np", "pt"):
        with ringsafe.safe_open(str(path), framework) as f:
            # Both an IndexError (the reference's torch slices) and a SafetensorError (its NumPy slices).
            with pytest.raises(IndexError) as e:
                f.get_slice("t")[index]
            assert isinstance(e.value, ringsafe.SafetensorError)
            with pytest.raises(ringsafe.SafetensorError) as e:
                f.get_slice("t")[(0,) * len(shape) + (0,)]  # too many indices
            assert isinstance(e.value, IndexError)


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_get_slice_on_a_zero_size_tensor(tmp_path, framework):
    full = np.zeros((0, 4), dtype=np.float32)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        s = f.get_slice("t")
        for index in [(), slice(None), (slice(None), 1), (Ellipsis, slice(1, 3)), (slice(None, None, -1), [0, 3])]:
            _check(s[index], _expected(full, index), framework, np.float32)
        with pytest.raises(IndexError):
            s[0]


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_scalar_tensor_slices(tmp_path, framework):
    full = np.array(3.5, dtype=np.float32)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.float32, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        s = f.get_slice("t")
        assert s.get_shape() == []
        _check(s[None], _expected(full, None), framework, np.float32)
        _check(s[None, ..., None], _expected(full, (None, Ellipsis, None)), framework, np.float32)
        with pytest.raises(IndexError):
            s[0]
        _check(s[()], _expected(full, ()), framework, np.float32)
        _check(s[...], _expected(full, Ellipsis), framework, np.float32)


def test_numpy_single_element_slice_is_0d(write_checkpoint):
    full = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = write_checkpoint({"t": full, "s": np.array(2.0, dtype=np.float32)})
    with ringsafe.safe_open(str(path), "np") as f:
        assert f.get_slice("t")[1, 2].shape == ()
        assert f.get_slice("t")[1, 2] == full[1, 2]
        assert f.get_slice("s")[()].shape == ()
        assert f.get_slice("s")[...].shape == ()


def test_numpy_empty_ellipsis_between_advanced_indexes(write_checkpoint):
    """NumPy: in a[:, 0, ..., [1, 2]] on a 3-d array the Ellipsis stands for no
    dimension but still separates the two advanced indexes (0 and [1, 2]), so
    the broadcast dimension goes first: shape (2, 5), not (5, 2)."""
    full = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    index = (slice(None), 0, Ellipsis, [1, 2])
    assert full[index].shape == (2, 5)
    path = write_checkpoint({"t": full})
    with ringsafe.safe_open(str(path), "np") as f:
        _check(f.get_slice("t")[index], _expected(full, index), "np", np.float32)


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("index", [(slice(1, 3),), (slice(None), slice(None, None, 2)), (slice(None, None, -1),),
                                   ([2, 0],), (Ellipsis,), (1,)])
def test_slices_are_independent_of_each_other_and_of_the_file(tmp_path, framework, index):
    """backend="pread": every slice and tensor is memory of its own."""
    full = np.arange(4 * 6, dtype=np.int64).reshape(4, 6)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.int64, framework)
    before = path.read_bytes()
    with ringsafe.safe_open(str(path), framework, backend="pread") as f:
        s = f.get_slice("t")
        a, b = s[index], s[index]
        whole = f.get_tensor("t")
        if framework == "np":
            assert a.flags.writeable
            a[...] = -1
            assert (b == full[index]).all()
            assert (whole == full).all()
        else:
            a.fill_(-1)
            assert torch.equal(b, torch.from_numpy(np.ascontiguousarray(full[index])))
            assert torch.equal(whole, torch.from_numpy(full))
        again = s[index]
        assert raw_bytes(again) == np.ascontiguousarray(full[index]).tobytes()
    assert path.read_bytes() == before


@pytest.mark.parametrize("index", [(slice(1, 3),), (Ellipsis,), (1,)])
def test_mmap_views_are_private_to_the_process(tmp_path, index):
    """backend="mmap" (default): as the reference's, tensors of one handle are views of one
    private mapping (a write shows in later views of the same handle) and never reach the file
    or another handle."""
    full = np.arange(4 * 6, dtype=np.int64).reshape(4, 6)
    path = tmp_path / "t.safetensors"
    _save(path, "t", full, torch.int64, "pt")
    before = path.read_bytes()
    with ringsafe.safe_open(str(path), "pt") as f:
        a = f.get_slice("t")[index]
        a.fill_(-1)
        assert (f.get_tensor("t") == -1).any()
        with ringsafe.safe_open(str(path), "pt") as g:
            assert torch.equal(g.get_tensor("t"), torch.from_numpy(full))
    assert path.read_bytes() == before
    import ringsafe.torch as rpt
    assert torch.equal(rpt.load_file(str(path))["t"], torch.from_numpy(full))


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_large_tensor_slices(tmp_path, framework):
    """A tensor above the 2 MiB arena threshold: row, column, strided and reversed boxes."""
    full = _full_array([1024, 768], np.float32, 7)  # 3 MiB
    path = tmp_path / "big.safetensors"
    _save(path, "w", full, torch.float32, framework)
    with ringsafe.safe_open(str(path), framework) as f:
        s = f.get_slice("w")
        for index in [(slice(100, 900),), (slice(None), 5), (slice(None, None, 7), slice(3, -3, 5)),
                      (slice(None, None, -1),), ([1023, 0, 512],), (Ellipsis, slice(700, None))]:
            _check(s[index], _expected(full, index), framework, np.float32)


# --- reading only the needed bytes ---------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]


def _resident_bytes(path):
    """Bytes of ``path`` in the page cache (mincore over a read-only mapping)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), size, prot=mmap.PROT_READ) as m:
        view = np.frombuffer(m, dtype=np.uint8)
        pages = -(-size // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        rc = _libc.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vec)
        del view
        if rc != 0:
            pytest.skip(f"mincore failed: errno {ctypes.get_errno()}")
        return sum(v & 1 for v in vec) * mmap.PAGESIZE


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_row_slice_reads_only_those_rows(tmp_path, framework):
    """A 64 MiB tensor; slicing 2 rows (32 KiB) of it with buffered reads brings
    at most a few MiB of the file into the page cache (header read and
    readahead included), where reading the whole tensor brings all of it."""
    rows, cols = 4096, 4096
    full = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    path = str(tmp_path / "big.safetensors")
    snp.save_file({"w": full}, path)
    size = os.path.getsize(path)
    evict(path)
    if _resident_bytes(path) > size // 16:
        pytest.skip("the file's pages cannot be dropped from the cache here (tmpfs?)")
    with ringsafe.safe_open(path, framework, direct=False) as f:
        s = f.get_slice("w")
        opened = _resident_bytes(path)
        part = s[2000:2002]
        grown = _resident_bytes(path) - opened
        assert raw_bytes(part) == full[2000:2002].tobytes()
        # The kernel's readahead around the slice, which a loaded machine was seen to
        # grow to exactly 8 MiB; a read of the tensor would bring 64.
        assert grown <= 12 << 20, f"{grown} bytes brought into the cache for a 32 KiB slice"
        part = s[-3:, 100:200]
        assert raw_bytes(part) == np.ascontiguousarray(full[-3:, 100:200]).tobytes()
        assert _resident_bytes(path) - opened < 16 << 20
        # The measurement does see a full read.
        f.get_tensor("w")
        assert _resident_bytes(path) > size - (1 << 20)

"""The Python API over real servers: http:// and https:// (a throwaway CA)
against nginx, s3:// against a throwaway Ceph radosgw. Every tensor is
compared byte for byte with what the reference ``safetensors`` loads from the
same file on disk; nginx's access log shows which byte ranges were asked for."""

import json
import os
import pathlib
import pickle
import shutil
import struct
import sys

import numpy as np
import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.numpy as rnp
import ringsafe.torch as rpt
import safetensors
import safetensors.torch as spt

from servers import Nginx, merge_ranges, nginx_server, radosgw_cluster, tls_ca  # noqa: F401 - pytest fixtures

PROBE = 256 << 10  # the engine's first, speculative Range request on open
BUCKET = "ringsafe-remote"
KEY = "dir/model file.safetensors"  # a space: the key is percent-encoded on the wire


# ---------------------------------------------------------------- helpers

def raw(t):
    """dtype name, shape and bytes of a torch tensor or NumPy array."""
    if isinstance(t, np.ndarray):
        return str(t.dtype), tuple(t.shape), t.tobytes()
    flat = t.detach().cpu().contiguous().reshape(-1)
    return str(t.dtype), tuple(t.shape), flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def assert_same(got, expected):
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert raw(got[name]) == raw(expected[name]), name


def header_of(path):
    """(data_start, {name: (begin, end)}) of a safetensors file, from its header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return 8 + n, {k: tuple(v["data_offsets"]) for k, v in h.items() if k != "__metadata__"}


def make_tensors():
    g = torch.Generator().manual_seed(7)
    return {
        "emb": torch.randn(2048, 512, generator=g),  # 4 MiB, rows of 2 KiB
        "proj": torch.randn(512, 1024, generator=g).to(torch.bfloat16),
        "norm": torch.randn(1024, generator=g).to(torch.float16),
        "ids": torch.randint(-2**40, 2**40, (1000,), generator=g),
        "q8": torch.randint(-128, 127, (333,), generator=g, dtype=torch.int8),
        "mask": torch.rand(37, generator=g) > 0.5,
        "scale": torch.tensor(3.25, dtype=torch.float64),
        "empty": torch.zeros(0, 4),
        "u8": torch.arange(256, dtype=torch.uint8).reshape(16, 16),
    }


NUMPY_NAMES = ["emb", "norm", "ids", "q8", "mask", "scale", "empty", "u8"]  # BF16 has no NumPy type


def reference_numpy(path, names=NUMPY_NAMES):
    with safetensors.safe_open(str(path), "np") as f:
        return {n: f.get_tensor(n) for n in names}


class Checkpoint:
    def __init__(self, path, url, server):
        self.path, self.url, self.server = path, url, server
        self.size = path.stat().st_size
        self.data_start, self.offsets = header_of(path)
        self.expected = spt.load_file(str(path))

    @property
    def tls_url(self):
        return self.server.url("remote/model.safetensors", tls=True)

    def extent(self, name):
        """[first, end) of a tensor's bytes in the file."""
        b, e = self.offsets[name]
        return self.data_start + b, self.data_start + e


@pytest.fixture(scope="module")
def ckpt(nginx_server):
    d = nginx_server.root / "remote"
    d.mkdir(exist_ok=True)
    path = d / "model.safetensors"
    spt.save_file(make_tensors(), str(path), metadata={"format": "pt", "source": "test_remote"})
    return Checkpoint(path, nginx_server.url("remote/model.safetensors"), nginx_server)


def data_entries(entries, path):
    """The log entries for ``path`` that are not the opening probe (bytes=0-...)."""
    return [e for e in entries if e.path == path and e.ranges and e.ranges[0][0] != 0]


def requested(entries):
    """[(first, end)] of every range asked for, end exclusive."""
    out = []
    for e in entries:
        assert e.status == 206, e
        for first, last in e.ranges:
            out.append((first, last + 1))
    return out


# ---------------------------------------------------------------- http: whole loads

@pytest.mark.parametrize("framework", ["pt", "np"])
def test_load_file_over_http_is_byte_identical(ckpt, framework):
    if framework == "pt":
        assert_same(rpt.load_file(ckpt.url), ckpt.expected)
    else:
        assert_same(rnp.load_file(ckpt.url, select=NUMPY_NAMES), reference_numpy(ckpt.path))


def test_safe_open_over_http_reads_like_local(ckpt):
    with ringsafe.safe_open(ckpt.url, "pt") as f, spt.safe_open(str(ckpt.path), "pt") as ref:
        assert f.keys() == sorted(ref.keys())
        assert f.metadata() == ref.metadata()
        assert sorted(f.offset_keys()) == f.keys()
        for name in f.keys():
            assert raw(f.get_tensor(name)) == raw(ref.get_tensor(name)), name
        assert_same(f.get_tensors(), ckpt.expected)


def test_iter_tensors_over_http_streams_every_tensor(ckpt, nginx_server):
    mark = nginx_server.mark()
    got = {}
    for name, t in rpt.iter_tensors(ckpt.url, memory_limit=5 << 20):
        assert name not in got
        got[name] = t.clone()
    assert_same(got, ckpt.expected)
    # Every tensor past the opening probe was fetched by its own Range requests.
    covered = merge_ranges(requested(data_entries(nginx_server.log(mark), "/remote/model.safetensors")))
    for name in ckpt.expected:
        first, end = ckpt.extent(name)
        if end > first and first >= PROBE:
            assert any(a <= first and end <= b for a, b in covered), name


def test_read_into_fills_the_callers_tensors_over_http(ckpt):
    dst = {n: torch.zeros_like(t) for n, t in ckpt.expected.items()}
    ptrs = {n: t.data_ptr() for n, t in dst.items()}
    out = rpt.read_into(ckpt.url, dst)
    assert out is dst
    assert {n: t.data_ptr() for n, t in dst.items()} == ptrs  # in place
    assert_same(dst, ckpt.expected)

    part = {"emb": torch.empty(2048, 512), "u8": torch.empty(16, 16, dtype=torch.uint8)}
    with ringsafe.safe_open(ckpt.url, "pt") as f:
        f.read_into(part)
    assert_same(part, {n: ckpt.expected[n] for n in part})


# ---------------------------------------------------------------- http: only the bytes asked for

def test_get_slice_of_leading_rows_fetches_only_those_rows(ckpt, nginx_server):
    row = 512 * 4
    lo, hi = 1500, 1510
    first, end = ckpt.extent("emb")
    assert first + lo * row > PROBE  # the rows lie beyond the opening probe
    mark = nginx_server.mark()
    with ringsafe.safe_open(ckpt.url, "pt") as f:
        s = f.get_slice("emb")
        assert s.get_shape() == [2048, 512]
        assert s.get_dtype() == "F32"
        got = s[lo:hi]
    assert raw(got) == raw(ckpt.expected["emb"][lo:hi])
    entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
    assert entries, "nothing reached nginx"
    # The opening probe (the header), then exactly the rows' bytes.
    assert entries[0].ranges == [(0, PROBE - 1)]
    rest = requested(entries[1:])
    assert merge_ranges(rest) == [(first + lo * row, first + hi * row)]
    assert sum(b - a for a, b in rest) == (hi - lo) * row  # nothing twice
    assert sum(e.body_bytes for e in entries) <= PROBE + (hi - lo) * row < ckpt.size // 4


@pytest.mark.parametrize("index,rows", [
    ((slice(100, 140), slice(10, 20)), (100, 140)),
    ((slice(300, 200, -7), slice(None, None, 3)), (202, 301)),
    (7, (7, 8)),
    ((-1, slice(500, None)), (2047, 2048)),
    ([5, 900, 17], (5, 901)),
    ((slice(10, 20), Ellipsis, 511), (10, 20)),
    ((slice(30, 32), None, slice(-3, None)), (30, 32)),
], ids=["rows-cols", "negative-steps", "one-row", "last-row-tail", "row-list", "ellipsis-column", "new-axis"])
def test_get_slice_boxes_over_http_match_and_stay_in_their_rows(ckpt, nginx_server, index, rows):
    row = 512 * 4
    first, _ = ckpt.extent("emb")
    with ringsafe.safe_open(ckpt.url, "pt") as f:
        s = f.get_slice("emb")
        mark = nginx_server.mark()
        got = s[index]
    expected = ckpt.expected["emb"].numpy()[index]  # NumPy: torch has no negative steps
    assert tuple(got.shape) == expected.shape
    assert got.numpy().tobytes() == expected.tobytes()
    asked = requested(data_entries(nginx_server.log(mark), "/remote/model.safetensors"))
    assert asked
    lo, hi = rows  # every byte asked for lies in the rows of the bounding box
    for a, b in asked:
        assert first + lo * row <= a < b <= first + hi * row, (a, b)
    assert sum(b - a for a, b in asked) <= (hi - lo) * row


def test_chunk_and_connection_options_shape_the_requests(ckpt, nginx_server):
    chunk = 1 << 20
    mark = nginx_server.mark()
    assert_same(rpt.load_file(ckpt.url, http_chunk=chunk, connections=4), ckpt.expected)
    entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
    data = data_entries(entries, "/remote/model.safetensors")
    asked = requested(data)
    assert all(b - a <= chunk for a, b in asked)
    emb_first, emb_end = ckpt.extent("emb")
    assert sum(1 for a, b in asked if emb_first <= a and b <= emb_end) >= (emb_end - emb_first) // chunk
    assert 2 <= len({e.connection for e in data}) <= 4
    # Each byte of every tensor asked for once.
    assert sum(b - a for a, b in asked) == sum(b - a for a, b in merge_ranges(asked))
    merged = merge_ranges(asked)
    for name in ckpt.expected:
        first, end = ckpt.extent(name)
        if end > first:
            assert any(a <= first and end <= b for a, b in merged), name


def test_one_connection_carries_every_request(ckpt, nginx_server):
    mark = nginx_server.mark()
    assert_same(rpt.load_file(ckpt.url, http_chunk=512 << 10, connections=1), ckpt.expected)
    entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
    assert len(data_entries(entries, "/remote/model.safetensors")) >= 8
    assert len({e.connection for e in entries}) == 1


def test_connections_and_chunk_come_from_the_environment_unless_given(ckpt, nginx_server, monkeypatch):
    monkeypatch.setenv("RINGSAFE_CONNECTIONS", "1")
    monkeypatch.setenv("RINGSAFE_CHUNK", "512K")
    mark = nginx_server.mark()
    assert_same(rpt.load_file(ckpt.url), ckpt.expected)
    entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
    assert len({e.connection for e in entries}) == 1
    asked = requested(data_entries(entries, "/remote/model.safetensors"))
    assert asked and all(b - a <= 512 << 10 for a, b in asked)
    # Options given win over the environment (numpy integers are integers too).
    mark = nginx_server.mark()
    assert_same(rpt.load_file(ckpt.url, connections=np.int64(4), http_chunk=np.uint32(256 << 10)), ckpt.expected)
    data = data_entries(nginx_server.log(mark), "/remote/model.safetensors")
    assert 2 <= len({e.connection for e in data}) <= 4
    assert all(b - a <= 256 << 10 for a, b in requested(data))


def test_http_threads_option_reads_exactly_over_its_loops(ckpt, nginx_server, monkeypatch):
    for threads in (1, 2, 4, np.int32(3)):
        mark = nginx_server.mark()
        assert_same(rpt.load_file(ckpt.url, http_threads=threads, connections=4, http_chunk=256 << 10), ckpt.expected)
        data = data_entries(nginx_server.log(mark), "/remote/model.safetensors")
        assert 2 <= len({e.connection for e in data}) <= 4
    # From the environment when not given; a bad value names the variable.
    monkeypatch.setenv("RINGSAFE_HTTP_THREADS", "2")
    assert_same(rpt.load_file(ckpt.url, connections=2), ckpt.expected)
    monkeypatch.setenv("RINGSAFE_HTTP_THREADS", "lots")
    with pytest.raises(ringsafe.SafetensorError, match="RINGSAFE_HTTP_THREADS='lots'"):
        ringsafe.Reader(ckpt.url)
    # Given, it wins over the environment.
    assert_same(rpt.load_file(ckpt.url, http_threads=2), ckpt.expected)


@pytest.mark.parametrize("key, value, exc", [
    ("http_threads", 0, ValueError), ("http_threads", 257, ValueError), ("http_threads", -2, ValueError),
    ("http_threads", "2", TypeError), ("http_threads", True, TypeError), ("http_threads", 2.0, TypeError),
    ("connections", 2**33, ValueError), ("connections", 0, ValueError), ("connections", 257, ValueError),
    ("connections", -1, ValueError), ("connections", "8", TypeError), ("connections", True, TypeError),
    ("connections", 8.0, TypeError), ("http_chunk", 1, ValueError), ("http_chunk", (1 << 30) + 1, ValueError),
    ("http_chunk", 1.5, TypeError), ("threads", 2**40, ValueError), ("max_attempts", "3", TypeError),
    ("token", 5, TypeError), ("verify_tls", 1, TypeError), ("headers", {"X-A": 1}, TypeError),
    ("cross_origin_headers", "Cookie", TypeError), ("cross_origin_headers", [1], TypeError),
    ("allow_https_downgrade", 1, TypeError), ("low_speed_limit", -1, ValueError), ("low_speed_limit", 1.5, TypeError),
    ("low_speed_time", 0, ValueError), ("low_speed_time", "30", TypeError), ("max_total_attempts", "3", TypeError)])
def test_bad_connection_and_chunk_options_name_themselves(key, value, exc):
    # Refused before anything is opened: nothing listens on port 1.
    with pytest.raises(exc, match=key):
        ringsafe.Reader("http://127.0.0.1:1/m.safetensors", **{key: value})


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("RINGSAFE_CONNECTIONS", "lots")
    with pytest.raises(ringsafe.SafetensorError, match="RINGSAFE_CONNECTIONS='lots'"):
        ringsafe.Reader("http://127.0.0.1:1/m.safetensors")
    monkeypatch.delenv("RINGSAFE_CONNECTIONS")
    monkeypatch.setenv("RINGSAFE_CHUNK", "2G")
    with pytest.raises(ringsafe.SafetensorError, match="RINGSAFE_CHUNK='2G'"):
        ringsafe.Reader("http://127.0.0.1:1/m.safetensors")


@pytest.mark.parametrize("options, named", [
    ({"headers": {"X-Api-Key": "hush\r\nX-Injected: 1"}}, "X-Api-Key"),
    ({"headers": {"X-Api-Key": "hush\n"}}, "X-Api-Key"),
    ({"headers": {"X-Api-Key": "hush\0"}}, "X-Api-Key"),
    ({"headers": {"X-Bad\r\nX-Injected": "1"}}, "X-Bad"),
    ({"token": "hush\r\nX-Injected: 1"}, "bearer token")])
def test_cr_lf_or_nul_in_headers_or_token_is_refused_before_sending(ckpt, nginx_server, options, named):
    mark = nginx_server.mark()
    with pytest.raises(ringsafe.SafetensorError) as e:
        rpt.load_file(ckpt.url, **options)
    assert named in str(e.value)
    assert "hush" not in str(e.value)  # never the value
    assert not [x for x in nginx_server.log(mark) if x.path == "/remote/model.safetensors"]


def test_token_and_extra_headers_go_with_every_request(ckpt, nginx_server):
    mark = nginx_server.mark()
    got = rpt.load_file(ckpt.url, token="not-a-secret", headers={"X-Test-Marker": "m-42"}, select=["u8", "emb"],
                        http_chunk=1 << 20)
    assert_same(got, {n: ckpt.expected[n] for n in ("u8", "emb")})
    entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
    assert len(entries) > 2
    assert {(e.authorization, e.marker) for e in entries} == {("Bearer not-a-secret", "m-42")}


def test_a_redirect_to_another_origin_carries_only_opted_in_headers_and_never_downgrades(
        ckpt, nginx_server, tls_ca, tmp_path):
    # A second nginx (another port: another origin) whose /go/X redirects to the first's /X.
    (tmp_path / "www").mkdir()
    hop = Nginx(tmp_path / "www", tmp_path / "nginx", tls=tls_ca,
                server_extra=f"    location /go/ {{ rewrite ^/go/(.*)$ {nginx_server.url()}$1 redirect; }}\n")
    try:
        url = hop.url("go/remote/model.safetensors")
        for opted_in, seen in (([], ("", "")), (["x-test-marker"], ("", "m-7"))):
            mark = nginx_server.mark()
            got = rpt.load_file(url, token="not-a-secret", headers={"X-Test-Marker": "m-7"}, select=["u8"],
                                cross_origin_headers=opted_in)
            assert_same(got, {"u8": ckpt.expected["u8"]})
            entries = [e for e in nginx_server.log(mark) if e.path == "/remote/model.safetensors"]
            assert entries and {(e.authorization, e.marker) for e in entries} == {seen}

        tls_url = hop.url("go/remote/model.safetensors", tls=True)
        with pytest.raises(ringsafe.SafetensorError) as info:
            rpt.load_file(tls_url, ca_file=str(tls_ca.ca_cert))
        assert info.value.kind == "HttpError"
        assert tls_url in str(info.value) and ckpt.url in str(info.value)
        assert_same(rpt.load_file(tls_url, ca_file=str(tls_ca.ca_cert), allow_https_downgrade=True), ckpt.expected)
    finally:
        hop.close()


def test_minimum_speed_and_total_attempts_options_are_taken(ckpt):
    got = rpt.load_file(ckpt.url, low_speed_limit=1 << 10, low_speed_time=5, max_total_attempts=3, select=["u8"])
    assert_same(got, {"u8": ckpt.expected["u8"]})
    assert_same(rpt.load_file(ckpt.url, low_speed_limit=0, select=["u8"]), {"u8": ckpt.expected["u8"]})


def test_a_header_larger_than_the_opening_probe(nginx_server):
    # ~3000 names of ~110 characters: a header of ~400 KiB, past the 256 KiB probe.
    tensors = {f"model.layers.{i}.block.with.a.rather.long.name.so.that.the.header.grows.{'x' * 20}":
               torch.full((16,), float(i)) for i in range(3000)}
    path = nginx_server.root / "remote" / "big-header.safetensors"
    spt.save_file(tensors, str(path))
    data_start, _ = header_of(path)
    assert data_start > PROBE
    expected = spt.load_file(str(path))
    assert_same(rpt.load_file(nginx_server.url("remote/big-header.safetensors")), expected)
    with ringsafe.safe_open(nginx_server.url("remote/big-header.safetensors"), "pt") as f:
        assert f.keys() == sorted(expected)
        name = f.offset_keys()[-1]
        assert raw(f.get_tensor(name)) == raw(expected[name])


def test_a_redirect_is_followed_once_and_remembered(ckpt, nginx_server):
    mark = nginx_server.mark()
    assert_same(rpt.load_file(nginx_server.url("moved/remote/model.safetensors"), http_chunk=1 << 20), ckpt.expected)
    entries = nginx_server.log(mark)
    assert [e.status for e in entries if e.path.startswith("/moved/")] == [302]
    assert len([e for e in entries if e.path == "/remote/model.safetensors"]) > 2


# ---------------------------------------------------------------- http: errors

def test_a_server_that_ignores_range_is_refused_clearly(ckpt, nginx_server):
    url = nginx_server.url("no-range/remote/model.safetensors")
    with pytest.raises(ringsafe.SafetensorError) as info:
        rpt.load_file(url)
    assert info.value.kind == "RangeNotSupported"
    assert url in str(info.value)


@pytest.mark.parametrize("how", ["safe_open", "load_file", "iter_tensors", "numpy.load_file", "read_into"])
def test_a_missing_url_is_a_404_naming_it(nginx_server, how):
    url = nginx_server.url("remote/no-such-file.safetensors")
    calls = {
        "safe_open": lambda: ringsafe.safe_open(url, "pt"),
        "load_file": lambda: rpt.load_file(url),
        "iter_tensors": lambda: rpt.iter_tensors(url),
        "numpy.load_file": lambda: rnp.load_file(url),
        "read_into": lambda: rpt.read_into(url, {"x": torch.empty(1)}),
    }
    with pytest.raises(ringsafe.SafetensorError) as info:
        calls[how]()
    assert info.value.kind == "HttpError"
    assert "404" in str(info.value)
    assert url in str(info.value)


def test_a_file_replaced_after_open_is_refused_not_mixed(ckpt, nginx_server):
    path = ckpt.path.parent / "changing.safetensors"
    shutil.copyfile(ckpt.path, path)
    url = nginx_server.url("remote/changing.safetensors")
    with ringsafe.safe_open(url, "pt") as f:
        assert raw(f.get_slice("emb")[0:1]) == raw(ckpt.expected["emb"][0:1])
        other = {k: v.clone() for k, v in ckpt.expected.items()}
        other["emb"] += 1
        spt.save_file(other, str(path) + ".new", metadata={"format": "pt", "source": "test_remote"})
        st = path.stat()
        os.replace(str(path) + ".new", path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))  # same size: the ETag differs by mtime
        with pytest.raises(ringsafe.SafetensorError) as info:
            f.get_tensor("emb")
    assert info.value.kind == "ObjectChanged"
    assert "'emb'" in str(info.value)
    assert url in str(info.value)


# ---------------------------------------------------------------- https

def test_https_with_the_test_ca_is_byte_identical(ckpt, tls_ca):
    assert_same(rpt.load_file(ckpt.tls_url, ca_file=str(tls_ca.ca_cert)), ckpt.expected)
    with ringsafe.safe_open(ckpt.tls_url, "pt", ca_file=str(tls_ca.ca_cert)) as f:
        assert raw(f.get_slice("emb")[2000:2003, 7]) == raw(ckpt.expected["emb"][2000:2003, 7])


def test_https_without_the_ca_fails_verification(ckpt, nginx_server):
    origin = f"https://127.0.0.1:{nginx_server.tls_port}"
    for call in (lambda: rpt.load_file(ckpt.tls_url), lambda: ringsafe.safe_open(ckpt.tls_url, "pt")):
        with pytest.raises(ringsafe.SafetensorError) as info:
            call()
        assert info.value.kind == "HttpError"
        assert "certificate verify failed" in str(info.value)
        assert origin in str(info.value)


def test_https_with_another_ca_fails_verification(ckpt, tmp_path):
    from servers import ServerUnavailable, make_test_ca
    url = ckpt.tls_url
    try:
        other = make_test_ca(tmp_path / "other-ca")
    except ServerUnavailable as e:
        pytest.skip(str(e))
    with pytest.raises(ringsafe.SafetensorError, match="certificate verify failed"):
        rpt.load_file(url, ca_file=str(other.ca_cert))


def test_https_verification_can_be_turned_off(ckpt):
    assert_same(rpt.load_file(ckpt.tls_url, verify_tls=False, select=["u8", "ids"]),
                {n: ckpt.expected[n] for n in ("u8", "ids")})


def test_an_unreadable_ca_file_is_named(ckpt, tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ringsafe.SafetensorError) as info:
        rpt.load_file(ckpt.tls_url, ca_file=str(missing))
    assert str(missing) in str(info.value)
    not_pem = tmp_path / "not.pem"
    not_pem.write_bytes(b"\x00" * 100)
    with pytest.raises(ringsafe.SafetensorError) as info:
        rpt.load_file(ckpt.tls_url, ca_file=str(not_pem))
    assert str(not_pem) in str(info.value)


# ---------------------------------------------------------------- what a signed URL shows a person

# A presigned S3 URL's query and an Azure SAS (nginx ignores both); none of SECRETS may be shown.
PRESIGNED = ("?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20250101%2Fus-east-1%2Fs3%2F"
             "aws4_request&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-Security-Token=SECRETSESSIONTOKEN"
             "&X-Amz-SignedHeaders=host&X-Amz-Signature=f00dfeedc0ffee")
SAS = "?sv=2022-11-02&sr=b&sp=r&se=2030-01-01T00%3A00%3A00Z&sig=SASSIGNATURE"
SECRETS = ("AKIAEXAMPLE", "SECRETSESSIONTOKEN", "f00dfeedc0ffee", "SASSIGNATURE")


def shows_no_secret(text):
    return not any(s in text for s in SECRETS)


@pytest.fixture(params=["presigned", "sas"])
def signed_url(request, ckpt):
    return ckpt.url + (PRESIGNED if request.param == "presigned" else SAS)


def test_the_shown_form_of_a_signed_url_writes_each_signing_value_as_dots(signed_url, ckpt):
    shown = ringsafe.without_url_secrets(signed_url)
    assert shows_no_secret(shown)
    if "sig=" in signed_url:
        assert shown == ckpt.url + "?sv=2022-11-02&sr=b&sp=r&se=2030-01-01T00%3A00%3A00Z&sig=..."
    else:
        assert shown == (ckpt.url + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...&X-Amz-Date=20250101T000000Z"
                         "&X-Amz-Expires=900&X-Amz-Security-Token=...&X-Amz-SignedHeaders=host&X-Amz-Signature=...")


@pytest.mark.parametrize("how", ["torch.load_file", "numpy.load_file", "load_model"])
def test_a_progress_bar_names_a_signed_url_without_its_secrets(signed_url, ckpt, capsys, how):
    pytest.importorskip("tqdm")
    if how == "torch.load_file":
        assert_same(rpt.load_file(signed_url, progress=True), ckpt.expected)
    elif how == "numpy.load_file":
        assert_same(rnp.load_file(signed_url, select=NUMPY_NAMES, progress=True), reference_numpy(ckpt.path))
    else:
        model = torch.nn.Module()
        model.emb = torch.nn.Parameter(torch.empty(2048, 512))
        rpt.load_model(model, signed_url, strict=False, progress=True)
        assert torch.equal(model.emb.detach(), ckpt.expected["emb"])
    err = capsys.readouterr().err
    assert f"loading {ringsafe.without_url_secrets(signed_url)}" in err  # the bar names the URL as shown
    assert shows_no_secret(err)


def test_reader_spec_and_shard_info_show_a_signed_url_without_its_secrets(signed_url):
    shown = ringsafe.without_url_secrets(signed_url)
    r = ringsafe.Reader(signed_url)
    try:
        assert r.spec == shown and r.raw_spec == signed_url
        (s,) = r.shards()
        assert s.spec == shown and s.raw_spec == signed_url
        for text in (repr(s), str(s), f"{s}", repr(r.shards()), f"{r.spec}"):
            assert shown in text and shows_no_secret(text)
        made = ringsafe._ringsafe.ShardInfo(spec=signed_url, size=s.size, data_start=s.data_start)
        assert made == s and repr(made) == repr(s)
        # The raw spec is the value to pass on: pickled with the record, it opens the same object.
        again = pickle.loads(pickle.dumps(s))
        assert again == s and again.raw_spec == signed_url and again.spec == shown
        other = ringsafe.Reader(again.raw_spec)
        assert other.tensors() == r.tensors()
        other.close()
    finally:
        r.close()


def test_errors_found_on_the_python_side_show_a_signed_url_without_its_secrets(signed_url):
    with ringsafe.safe_open(signed_url, "pt") as f:
        with pytest.raises(ringsafe.SafetensorError) as info:
            f.get_tensor("no-such-tensor")
    assert ringsafe.without_url_secrets(signed_url) in str(info.value) and shows_no_secret(str(info.value))
    # What a rank of ringsafe.distributed rebuilds from another rank's description.
    from ringsafe._dist_exchange import _ErrorDescription, _rebuild
    for desc in [_ErrorDescription("SafetensorError", "HttpError", None, ""),
                 _ErrorDescription("RuntimeError", None, None, ""),
                 _ErrorDescription("FileNotFoundError", None, 2, "")]:
        e = _rebuild(desc, f"rank 1 of 2: fetching bytes 0-9 of {signed_url}")
        assert shows_no_secret(str(e)), desc


# ---------------------------------------------------------------- s3:// against radosgw

@pytest.fixture(scope="module")
def s3_object(radosgw_cluster, ckpt):
    assert radosgw_cluster.create_bucket(BUCKET) == 200
    assert radosgw_cluster.put_object(BUCKET, KEY, ckpt.path) == 200
    return radosgw_cluster


@pytest.fixture
def aws_env(s3_object, monkeypatch):
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
                "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(var, raising=False)
    for k, v in s3_object.env().items():
        monkeypatch.setenv(k, v)
    return s3_object


S3_URL = f"s3://{BUCKET}/{KEY}"
S3_PATH = f"/{BUCKET}/dir/model%20file.safetensors"


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_s3_load_file_is_byte_identical(aws_env, ckpt, framework):
    if framework == "pt":
        assert_same(rpt.load_file(S3_URL), ckpt.expected)
    else:
        assert_same(rnp.load_file(S3_URL, select=NUMPY_NAMES), reference_numpy(ckpt.path))


def test_s3_safe_open_slices_iteration_and_read_into(aws_env, ckpt):
    with ringsafe.safe_open(S3_URL, "pt", http_chunk=1 << 20, connections=4) as f:
        assert f.keys() == sorted(ckpt.expected)
        assert f.metadata() == {"format": "pt", "source": "test_remote"}
        assert raw(f.get_slice("emb")[1000:1003, ::5]) == raw(ckpt.expected["emb"][1000:1003, ::5])
        assert raw(f.get_tensor("proj")) == raw(ckpt.expected["proj"])
    got = {n: t.clone() for n, t in rpt.iter_tensors(S3_URL, memory_limit=5 << 20)}
    assert_same(got, ckpt.expected)
    dst = {"ids": torch.empty(1000, dtype=torch.int64), "norm": torch.empty(1024, dtype=torch.float16)}
    rpt.read_into(S3_URL, dst)
    assert_same(dst, {n: ckpt.expected[n] for n in dst})


def test_s3_endpoint_and_region_as_reader_options(aws_env, ckpt, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_REGION")
    got = rpt.load_file(S3_URL, s3_endpoint=aws_env.endpoint, s3_region=aws_env.region, select=["emb", "mask"])
    assert_same(got, {n: ckpt.expected[n] for n in ("emb", "mask")})


def test_s3_wrong_secret_is_a_403_naming_the_object(aws_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    for call in (lambda: rpt.load_file(S3_URL), lambda: ringsafe.safe_open(S3_URL, "pt")):
        with pytest.raises(ringsafe.SafetensorError) as info:
            call()
        assert info.value.kind == "HttpError"
        assert "403" in str(info.value)
        assert S3_PATH in str(info.value)


def test_s3_without_credentials_is_refused(aws_env, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ringsafe.SafetensorError, match="403"):
        rpt.load_file(S3_URL)


def test_s3_missing_key_is_a_404_naming_it(aws_env):
    with pytest.raises(ringsafe.SafetensorError) as info:
        rpt.load_file(f"s3://{BUCKET}/dir/absent.safetensors")
    assert "404" in str(info.value)
    assert f"/{BUCKET}/dir/absent.safetensors" in str(info.value)


def test_http_connections_resolves_like_the_engine(monkeypatch):
    from ringsafe._ringsafe import http_connections
    monkeypatch.delenv("RINGSAFE_CONNECTIONS", raising=False)
    default = http_connections()
    assert default >= 1 and http_connections(5) == 5
    monkeypatch.setenv("RINGSAFE_CONNECTIONS", "12")
    assert http_connections() == 12 and http_connections(3) == 3
    monkeypatch.setenv("RINGSAFE_CONNECTIONS", "abc")
    with pytest.raises(ringsafe.SafetensorError, match="RINGSAFE_CONNECTIONS"):
        http_connections()
    with pytest.raises(ValueError, match="connections"):
        http_connections(0)

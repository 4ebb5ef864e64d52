"""The arena cache behind owned-memory loads (backend="pread", URLs, file
objects, iter_tensors): reuse, the byte limit, release when idle, threads,
fork, and that recycled memory never shows another load's bytes."""

import os
import subprocess
import sys
import threading
import time

import pytest
import ringsafe
import ringsafe.torch as rpt
import safetensors.torch as spt
import torch


@pytest.fixture
def cache():
    """A cache with the default limit, emptied before and after the test."""
    before = ringsafe.arena_cache_stats()
    ringsafe.set_arena_cache(limit=256 << 20, idle_seconds=30)
    ringsafe.trim_arena_cache()
    yield
    ringsafe.set_arena_cache(limit=before["limit"], idle_seconds=before["idle_seconds"])
    ringsafe.trim_arena_cache()


def _file(tmp_path, name, seed, n=4):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"w{i}": torch.randn(256, 1024, generator=g) for i in range(n)}  # 1 MiB each
    path = tmp_path / name
    spt.save_file(tensors, str(path))
    return path, tensors


def test_a_freed_arena_serves_the_next_load(tmp_path, cache):
    path, tensors = _file(tmp_path, "a.safetensors", 1)
    first = rpt.load_file(str(path), backend="pread")
    s0 = ringsafe.arena_cache_stats()
    del first
    s1 = ringsafe.arena_cache_stats()
    assert s1["buffers"] == s0["buffers"] + 1 and s1["cached_bytes"] >= 4 << 20
    second = rpt.load_file(str(path), backend="pread")
    s2 = ringsafe.arena_cache_stats()
    assert s2["hits"] == s1["hits"] + 1 and s2["buffers"] == s1["buffers"] - 1
    for k, v in tensors.items():
        assert torch.equal(second[k], v)


def test_recycled_memory_holds_only_the_new_files_bytes(tmp_path, cache):
    big, _ = _file(tmp_path, "big.safetensors", 2, n=5)
    small, small_tensors = _file(tmp_path, "small.safetensors", 3, n=4)
    del_me = rpt.load_file(str(big), backend="pread")
    del del_me  # 5 MiB cached; the 4 MiB load below fits in it (at least 3/4 of it)
    got = rpt.load_file(str(small), backend="pread")
    assert ringsafe.arena_cache_stats()["hits"] >= 1
    for k, v in small_tensors.items():
        assert torch.equal(got[k], v)


def test_the_limit_bounds_what_is_kept(tmp_path, cache):
    path, _ = _file(tmp_path, "a.safetensors", 4)
    ringsafe.set_arena_cache(limit=1 << 20)
    before = ringsafe.arena_cache_stats()["released"]
    d = rpt.load_file(str(path), backend="pread")
    del d
    s = ringsafe.arena_cache_stats()
    assert s["cached_bytes"] == 0 and s["released"] > before
    ringsafe.set_arena_cache(limit=0)
    assert ringsafe.arena_cache_stats()["limit"] == 0
    with pytest.raises(ValueError):
        ringsafe.set_arena_cache(limit=-1)


def test_an_idle_cache_goes_back_to_the_kernel(tmp_path, cache):
    path, _ = _file(tmp_path, "a.safetensors", 5)
    ringsafe.set_arena_cache(idle_seconds=0.2)
    d = rpt.load_file(str(path), backend="pread")
    del d
    assert ringsafe.arena_cache_stats()["cached_bytes"] > 0
    deadline = time.monotonic() + 10
    while ringsafe.arena_cache_stats()["cached_bytes"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ringsafe.arena_cache_stats()["cached_bytes"] == 0


def test_threads_share_the_cache(tmp_path, cache):
    files = [_file(tmp_path, f"f{i}.safetensors", 10 + i) for i in range(4)]
    errors = []

    def run(path, tensors):
        try:
            for _ in range(6):
                got = rpt.load_file(str(path), backend="pread")
                for k, v in tensors.items():
                    assert torch.equal(got[k], v)
                del got
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=f) for f in files for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert ringsafe.arena_cache_stats()["hits"] > 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_with_an_empty_cache(tmp_path, cache):
    path, tensors = _file(tmp_path, "a.safetensors", 20)
    d = rpt.load_file(str(path), backend="pread")
    del d
    assert ringsafe.arena_cache_stats()["cached_bytes"] > 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: empty cache, loads work, exits without pytest's teardown
        ok = 0
        try:
            torch.set_num_threads(1)  # the parent's OpenMP pool does not survive fork()
            ok = ringsafe.arena_cache_stats()["cached_bytes"] == 0
            got = rpt.load_file(str(path), backend="pread")
            ok = ok and all(torch.equal(got[k], v) for k, v in tensors.items())
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    answer = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert ringsafe.arena_cache_stats()["cached_bytes"] > 0  # the parent's is untouched


def test_environment_variable_sets_the_limit():
    code = "import ringsafe; print(ringsafe.arena_cache_stats()['limit'])"
    env = dict(os.environ, RINGSAFE_ARENA_CACHE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_a_new_limit_frees_only_what_exceeds_it(tmp_path, cache):
    path, _ = _file(tmp_path, "a.safetensors", 30)
    d = rpt.load_file(str(path), backend="pread")
    del d
    held = ringsafe.arena_cache_stats()["cached_bytes"]
    assert held > 0
    ringsafe.set_arena_cache(limit=512 << 20)  # larger: what is cached stays
    assert ringsafe.arena_cache_stats()["cached_bytes"] == held
    ringsafe.set_arena_cache(limit=held - 1)  # smaller: it goes
    assert ringsafe.arena_cache_stats()["cached_bytes"] == 0

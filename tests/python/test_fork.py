"""Fork safety: a safe_open handle used before os.fork() (or a multiprocessing
'fork' pool, as DataLoader workers are) keeps reading exact bytes in the parent
and the child, at the same time. A child never touches the parent's io_uring
rings; a hang becomes a failure (alarm in the child, bounded wait in the
parent)."""

import multiprocessing
import os
import signal
import time
import warnings

import numpy as np
import pytest

import ringsafe

N = 3 << 20  # 3 MiB per tensor: a whole read spans several chunks


@pytest.fixture
def checkpoint(tmp_path):
    import safetensors.numpy as ref

    rng = np.random.default_rng(5)
    tensors = {
        "a": rng.integers(0, 256, N, dtype=np.uint8),
        "b": rng.standard_normal(N // 4).astype(np.float32),
        "small": rng.integers(0, 1 << 30, 1024, dtype=np.int32),
    }
    path = tmp_path / "fork.safetensors"
    ref.save_file(tensors, str(path))
    return path, tensors


def read_rounds(f, tensors, rounds, seed):
    """`rounds` reads (whole tensors and slices) checked byte for byte."""
    rng = np.random.default_rng(seed)
    names = sorted(tensors)
    for i in range(rounds):
        name = names[i % len(names)]
        want = tensors[name]
        if i % 2:
            lo = int(rng.integers(0, len(want)))
            hi = int(rng.integers(lo, len(want))) + 1
            got, want = f.get_slice(name)[lo:hi], want[lo:hi]
        else:
            got = f.get_tensor(name)
        if got.tobytes() != want.tobytes():
            return False
    return True


def fork_and_wait(child, meanwhile, limit=120):
    """Forks; the child runs child() under a 60 s alarm and exits 0 when it
    returns True. Runs meanwhile() in the parent, then returns the child's
    wait status (None when it hung and was killed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "process is multi-threaded"
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(60)
            code = 0 if child() else 1
        finally:
            os._exit(code)
    meanwhile()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.parametrize("options", [{}, {"threads": 2}, {"threads": 1, "queue_depth": 1}])
def test_parent_and_child_read_the_same_handle_at_once(checkpoint, options):
    path, tensors = checkpoint
    with ringsafe.safe_open(path, "np", **options) as f:
        assert read_rounds(f, tensors, 6, 1)  # the parent's rings exist before fork
        parent_ok = []
        status = fork_and_wait(lambda: read_rounds(f, tensors, 60, 2),
                               lambda: parent_ok.append(read_rounds(f, tensors, 60, 3)))
        assert status is not None, "the child hung"
        assert os.WIFEXITED(status), f"child killed by signal {os.WTERMSIG(status)}"
        assert os.WEXITSTATUS(status) == 0, "the child read wrong bytes or failed"
        assert parent_ok == [True]
        assert read_rounds(f, tensors, 10, 4)


def test_child_reads_alone_then_the_parent(checkpoint):
    path, tensors = checkpoint
    with ringsafe.safe_open(path, "np") as f:
        assert read_rounds(f, tensors, 6, 5)
        status = fork_and_wait(lambda: read_rounds(f, tensors, 30, 6), lambda: None)
        assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert read_rounds(f, tensors, 30, 7)


def _worker_read(args):
    name, lo, hi = args
    got = _worker_read.handle.get_slice(name)[lo:hi]
    return name, lo, hi, got.tobytes()


def test_multiprocessing_fork_pool_reads_an_inherited_handle(checkpoint):
    path, tensors = checkpoint
    with ringsafe.safe_open(path, "np") as f:
        assert read_rounds(f, tensors, 3, 8)
        _worker_read.handle = f
        jobs = [(name, i * 1000, i * 1000 + 50000) for name in ("a", "b") for i in range(12)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(2) as pool:
                pending = pool.map_async(_worker_read, jobs)
                assert read_rounds(f, tensors, 20, 9)  # the parent reads meanwhile
                results = pending.get(timeout=120)
        for name, lo, hi, data in results:
            assert data == tensors[name][lo:hi].tobytes(), (name, lo, hi)
        del _worker_read.handle

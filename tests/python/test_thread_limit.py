"""The package under a thread limit (RLIMIT_NPROC: the system refuses threads
with EAGAIN, as a container's or a cluster job's limit does): a load makes
call threads, shard pools, a cancel watcher, ring workers, page-population
threads and (safe_open on a cold file) a read-ahead thread, and any of them
may be refused. Each load runs in a fresh process
limited to k threads more than it has, for each k from 0 up: it must return
the exact tensors on the threads it got, never die (std::terminate) or fail.

RLIMIT_NPROC counts every thread of a user and does not bind root, so the
child drops to a user of its own first: the test needs root, and skips
without it."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import ringsafe

UID = 54321  # the limited child's user: no other process of it runs
EXTRA_THREADS = range(0, 9)  # past 8, every start this load asks for is granted

CHILD = textwrap.dedent("""
    import json, os, resource, sys
    import ringsafe
    import ringsafe.numpy as rnp
    path, how, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if how == "safe_open":  # a cold checkpoint: its first get_tensor starts reading ahead on a thread
        for name in os.listdir(os.path.dirname(path)):
            fd = os.open(os.path.join(os.path.dirname(path), name), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    threads = len(os.listdir("/proc/self/task"))
    os.setgroups([])
    os.setresgid(UID, UID, UID)
    os.setresuid(UID, UID, UID)
    resource.setrlimit(resource.RLIMIT_NPROC, (threads + extra, threads + extra))
    try:
        open(rnp.__file__).close()
    except OSError as e:  # the package cannot be read by that user (a checkout under /root)
        print(json.dumps(["skip", str(e)]))
        sys.exit(0)
    if how == "safe_open":
        with ringsafe.safe_open(path, "np") as f:
            got = {k: f.get_tensor(k) for k in f.keys()}
    else:
        got = rnp.load_file(path, backend=how)
    print(json.dumps(["ok", {k: v.tobytes().hex() for k, v in sorted(got.items())}]))
""").replace("UID", str(UID))


@pytest.fixture(scope="module")
def index():
    """A 6-shard checkpoint and its index in a directory the child's user can read (1.2 MB
    a shard: more than a Reader's first read caches, so a cold one has bytes to read ahead)."""
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC does not bind root, and only root can drop to a user of its own")
    from safetensors.numpy import save_file
    d = pathlib.Path(tempfile.mkdtemp(prefix="ringsafe-nproc-"))
    d.chmod(0o755)
    tensors, weight_map = {}, {}
    for s in range(6):
        part = {f"s{s}.a": np.arange(300_000 + s, dtype=np.int32), f"s{s}.b": np.full((7, 3), s, dtype=np.float16)}
        save_file(part, str(d / f"m-{s}.safetensors"))
        tensors.update(part)
        weight_map.update({n: f"m-{s}.safetensors" for n in part})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for f in d.iterdir():
        f.chmod(0o644)
        os.chown(f, UID, UID)  # its own: mincore() shows others' files all resident (nothing to read ahead)
    yield d / "model.safetensors.index.json", {k: v.tobytes().hex() for k, v in sorted(tensors.items())}
    shutil.rmtree(d)


@pytest.mark.parametrize("how", ["mmap", "pread", "safe_open"])  # load_file's backends; get_tensor, cold
@pytest.mark.parametrize("extra", EXTRA_THREADS)
def test_a_load_finishes_on_the_threads_the_system_gives(index, how, extra):
    path, want = index
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(ringsafe.__file__).resolve().parents[1]),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), how, str(extra)], capture_output=True,
                         text=True, env=env, cwd=path.parent, timeout=120)
    assert out.returncode == 0, f"{extra} more threads allowed: exit {out.returncode}\n{out.stderr[-3000:]}"
    status, got = json.loads(out.stdout.strip().splitlines()[-1])
    if status == "skip":
        pytest.skip(got)
    assert status == "ok" and got == want

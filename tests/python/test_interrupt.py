"""Ctrl-C during a long read or write: KeyboardInterrupt, no partial result,
the process still works afterwards. Each case runs in a subprocess that sends
itself SIGINT 0.1 s into the call and prints a RESULT line."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPATH = str(ROOT / "build" / "engine" / "python")

PRELUDE = textwrap.dedent("""
    import json, os, signal, sys, threading
    import torch
    import ringsafe, ringsafe.torch as rpt

    N, COUNT = 48 << 20, 8   # 8 x 192 MiB of float32 = 1.5 GiB

    def result(**kw):
        print("RESULT " + json.dumps(kw), flush=True)

    def interrupt_soon():
        t = threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT))
        t.start()
        return t
""")


def _run(script, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYPATH + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    return json.loads(lines[-1][len("RESULT "):])


def test_interrupt_load_then_load_again(tmp_path):
    path = tmp_path / "big.safetensors"
    r = _run("""
        path = sys.argv[1]
        with ringsafe.Writer(path, sync=False) as w:
            for i in range(COUNT):
                w.write(f"t{i}", torch.full((N,), float(i + 1)))
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        got = None
        timer = interrupt_soon()
        try:
            got = rpt.load_file(path)
            outcome = "completed"
        except KeyboardInterrupt:
            outcome = "interrupted"
        timer.join()
        again = rpt.load_file(path)
        exact = sorted(again) == [f"t{i}" for i in range(COUNT)] and all(
            bool(torch.all(again[f"t{i}"] == float(i + 1))) for i in range(COUNT))
        result(outcome=outcome, got_is_none=got is None, exact=exact)
    """, path)
    assert r["outcome"] == "interrupted", r
    assert r["got_is_none"]
    assert r["exact"], r


def test_interrupt_save_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    path = out / "big.safetensors"
    r = _run("""
        path = sys.argv[1]
        tensors = {f"t{i}": torch.full((N,), float(i + 1)) for i in range(COUNT)}
        timer = interrupt_soon()
        try:
            rpt.save_file(tensors, path, sync=True)
            outcome = "completed"
        except KeyboardInterrupt:
            outcome = "interrupted"
        timer.join()
        left = sorted(os.listdir(os.path.dirname(path)))
        # still usable afterwards
        small = os.path.join(os.path.dirname(path), "small.safetensors")
        rpt.save_file({"x": torch.arange(5)}, small)
        ok = bool(torch.equal(rpt.load_file(small)["x"], torch.arange(5)))
        os.unlink(small)
        result(outcome=outcome, left=left, ok=ok)
    """, path)
    assert r["outcome"] == "interrupted", r
    assert r["left"] == [], r
    assert r["ok"]
    assert os.listdir(out) == []

"""Peak memory of loads, saves and the streaming iterator, each measured in a
fresh subprocess: the peak RSS (VmHWM) is reset just before the call
(/proc/self/clear_refs "5") and compared with the RSS at that moment."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPATH = str(ROOT / "build" / "engine" / "python")
try:
    import ringsafe
except ImportError:  # run without PYTHONPATH: the build tree's package
    sys.path.insert(0, PYPATH)
    import ringsafe
import ringsafe.torch as rpt  # noqa: E402
import torch  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
SLACK = 64 * MiB
TENSORS = 16  # 16 x 64 MiB


PRELUDE = textwrap.dedent("""
    import gc, json, sys
    import torch
    import ringsafe, ringsafe.torch as rpt

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(field)

    def reset_peak():
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status("VmRSS")

    def report(before, **extra):
        peak = status("VmHWM")
        print("RESULT " + json.dumps(dict(before=before, peak=peak, added=peak - before, **extra)))
""")


def _measure(script, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYPATH + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


def _clear_refs_works():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _clear_refs_works(), reason="needs /proc/self/clear_refs to reset VmHWM")


@pytest.fixture(scope="module")
def gib_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    path = d / "one_gib.safetensors"
    with ringsafe.Writer(str(path), sync=False) as w:
        for i in range(TENSORS):
            w.write(f"t{i:02d}", torch.full((16 * MiB,), float(i + 1), dtype=torch.float32))
    assert path.stat().st_size >= GiB
    yield path
    path.unlink()


def test_load_file_peak(gib_file):
    r = _measure("""
        path = sys.argv[1]
        before = reset_peak()
        got = rpt.load_file(path)
        ok = all(float(got[f"t{i:02d}"][::4096].sum()) == (i + 1) * 4096 for i in range(16))
        report(before, ok=ok)
    """, gib_file)
    assert r["ok"]
    size = gib_file.stat().st_size
    assert r["added"] <= size + SLACK, r


def test_save_file_peak(gib_file, tmp_path):
    out = tmp_path / "saved.safetensors"
    r = _measure("""
        path = sys.argv[1]
        tensors = {f"t{i:02d}": torch.full((16 << 20,), float(i + 1)) for i in range(16)}
        before = reset_peak()
        rpt.save_file(tensors, path)
        report(before)
    """, out)
    try:
        assert out.stat().st_size >= GiB
        assert r["added"] < SLACK, r
    finally:
        out.unlink()


def test_iter_tensors_peak(gib_file):
    limit = 128 * MiB
    r = _measure("""
        path, limit = sys.argv[1], int(sys.argv[2])
        before = reset_peak()
        total, names = 0.0, []
        for name, t in rpt.iter_tensors(path, memory_limit=limit):
            total += float(t.sum())
            names.append(name)
            del t
        report(before, total=total, names=names)
    """, gib_file, limit)
    assert r["names"] == [f"t{i:02d}" for i in range(TENSORS)]
    assert r["total"] == sum((i + 1) * 16 * MiB for i in range(TENSORS))
    assert r["added"] < limit + SLACK, r

"""Peak memory of load_file, save_file, the Writer and the streaming iterator,
each measured in a fresh subprocess (torch imported, inputs made): the peak
RSS (VmHWM) is reset just before the call (/proc/self/clear_refs "5") and
compared with the RSS at that moment. Memory tests, not speed tests: no
timing is asserted.

RINGSAFE_TEST_MEMORY_MIB (default 1024) sets the size of the files, written
under pytest's temporary directory (on disk) and removed afterwards."""

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
import torch  # noqa: E402

MiB = 1 << 20
TOTAL = int(os.environ.get("RINGSAFE_TEST_MEMORY_MIB", "1024")) * MiB
TENSORS = 16
NUMEL = TOTAL // TENSORS // 4  # float32 elements per tensor
SLACK = 64 * MiB


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

    def close(a, b, rel=1e-6):
        return abs(a - b) <= rel * abs(b)

    def tensor(i, numel):
        return torch.full((numel,), float(i + 1), dtype=torch.float32)
""")


def _measure(script, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYPATH + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


def _clear_refs_works():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        with open("/proc/self/status") as f:
            return "VmHWM:" in f.read()
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _clear_refs_works(), reason="needs /proc/self/clear_refs to reset VmHWM")


def _names():
    return [f"t{i:02d}" for i in range(TENSORS)]


def _expected_sum():
    return float(sum((i + 1) * NUMEL for i in range(TENSORS)))


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    path = d / "big.safetensors"
    with ringsafe.Writer(str(path), sync=False) as w:
        for i, name in enumerate(_names()):
            w.write(name, torch.full((NUMEL,), float(i + 1), dtype=torch.float32))
    assert path.stat().st_size >= TOTAL
    yield path
    path.unlink()


def test_load_file_peak(big_file):
    r = _measure("""
        path, numel = sys.argv[1], int(sys.argv[2])
        before = reset_peak()
        got = rpt.load_file(path)
        report_peak = status("VmHWM")
        # values checked without big temporaries (their freed heap would stay in the RSS)
        ok = sorted(got) == [f"t{i:02d}" for i in range(16)] and all(
            close(float(got[f"t{i:02d}"].sum()), float((i + 1) * numel))
            and float(got[f"t{i:02d}"][::4099].min()) == float(got[f"t{i:02d}"][::4099].max()) == i + 1
            for i in range(16))
        del got
        gc.collect()
        after_free = status("VmRSS")
        print("RESULT " + json.dumps(dict(before=before, added=report_peak - before, ok=ok,
                                          left=after_free - before)))
    """, big_file, NUMEL)
    assert r["ok"]
    size = big_file.stat().st_size
    assert r["added"] <= size + SLACK, r
    # the arena goes back when the last view is gone
    assert r["left"] < SLACK, r


def test_save_file_peak(tmp_path):
    out = tmp_path / "saved.safetensors"
    r = _measure("""
        path, numel = sys.argv[1], int(sys.argv[2])
        tensors = {f"t{i:02d}": tensor(i, numel) for i in range(16)}
        before = reset_peak()
        rpt.save_file(tensors, path)
        report(before)
    """, out, NUMEL)
    try:
        assert out.stat().st_size >= TOTAL
        with ringsafe.safe_open(str(out), "pt") as f:
            assert f.keys() == _names()
            assert torch.equal(f.get_tensor("t15"), torch.full((NUMEL,), 16.0))
        assert r["added"] < SLACK, r
    finally:
        out.unlink(missing_ok=True)


def test_writer_peak(tmp_path):
    out = tmp_path / "written.safetensors"
    r = _measure("""
        path, numel = sys.argv[1], int(sys.argv[2])
        before = reset_peak()
        with ringsafe.Writer(path, sync=False) as w:
            for i in range(16):
                t = tensor(i, numel)  # made, written, dropped
                w.write(f"t{i:02d}", t)
                del t
        report(before)
    """, out, NUMEL)
    try:
        assert out.stat().st_size >= TOTAL
        with ringsafe.safe_open(str(out), "pt") as f:
            assert f.keys() == _names()
            assert torch.equal(f.get_tensor("t07"), torch.full((NUMEL,), 8.0))
        one_tensor = NUMEL * 4
        assert r["added"] < SLACK + one_tensor, r
    finally:
        out.unlink(missing_ok=True)


def test_iter_tensors_peak(big_file):
    limit = 128 * MiB
    assert NUMEL * 4 <= limit // 2, "each tensor must fit in half the limit for this test"
    r = _measure("""
        path, limit = sys.argv[1], int(sys.argv[2])
        before = reset_peak()
        total, names = 0.0, []
        for name, t in rpt.iter_tensors(path, memory_limit=limit):
            total += float(t.sum())  # consume it (a float32 sum: no copy of the tensor)
            names.append(name)
            del t
        report(before, total=total, names=names)
    """, big_file, limit)
    assert r["names"] == _names()
    assert r["total"] == pytest.approx(_expected_sum(), rel=1e-6)
    assert r["added"] < limit + SLACK, r

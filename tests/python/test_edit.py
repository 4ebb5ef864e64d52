"""`ringsafe edit` (ringsafe/edit.hpp): GGUF and safetensors metadata edits,
in place when the file has room, else one rewrite.

Every file an edit leaves is read back by gguf-py's GGUFReader and by
ringsafe.gguf (GGUF), or by the reference's safe_open and ringsafe
(safetensors): metadata as expected, tensors byte-equal. Each GGUF layout
transition is exercised: no padding (a gguf-py file) -> rewrite with the
padding last; last -> first and first -> last in place; no room -> rewrite.
The crash tests stall a child at the engine's hook (RINGSAFE_EDIT_TEST_STALL)
and kill -9 it there: the file holds the old metadata or the new, never a mix.
"""

import os
import pathlib
import signal
import stat
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import save_file as st_save  # noqa: E402

import ringsafe  # noqa: E402
import ringsafe.gguf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = ROOT / "build" / "tools" / "ringsafe"
PAD = "ringsafe.padding"


@pytest.fixture(autouse=True)
def _cli():
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")


def edit(path, *args, ok=True, env=None):
    run = subprocess.run([str(CLI), "edit", str(path), *map(str, args)], capture_output=True, text=True,
                         timeout=120, env=env)
    if ok:
        assert run.returncode == 0, run.stderr
    return run


def gguf_py_file(path, tokens=3000):
    """A gguf-py file (no padding entry): strings, integers, a float, a token array, three tensors."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_uint32("llama.context_length", 2048)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(tokens)])
    rng = np.random.default_rng(3)
    for i in range(3):
        w.add_tensor(f"blk.{i}.w", rng.standard_normal((4, 32)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def state(path):
    """(metadata without the padding, tensors) as gguf-py reads them, checked against ringsafe's reading."""
    r = gguf.GGUFReader(path)
    md = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.") and k != PAD}
    tensors = {t.name: (t.tensor_type.name, t.data.tobytes()) for t in r.tensors}
    with ringsafe.gguf.open(path) as f:
        mine = {k: v for k, v in f.metadata.items() if k != PAD}
        assert mine.keys() == md.keys()
        for k, v in md.items():
            assert mine[k] == pytest.approx(v) if isinstance(v, float) else mine[k] == v, k
        for t in f.tensors:
            raw = f.get_tensor(t.name, raw=True, framework="np")
            assert (t.type, np.asarray(raw).tobytes()) == tensors[t.name], t.name
        assert [t.name for t in f.tensors] == list(tensors)
    return md, tensors


def keys_in_order(path):
    return [k for k in gguf.GGUFReader(path).fields if not k.startswith("GGUF.")]


def padding_is_spaces(path):
    f = gguf.GGUFReader(path).fields[PAD]
    return bytes(f.parts[f.data[0]]) == b" " * len(f.parts[f.data[0]])


def test_gguf_py_file_rewritten_with_padding_then_in_place_both_ways(tmp_path):
    src = tmp_path / "a.gguf"
    gguf_py_file(src)
    src.chmod(0o640)
    md, tensors = state(src)
    ino = src.stat().st_ino

    run = edit(src, "--set", "general.name=a much longer name than before")
    assert run.stdout.startswith("rewrote") and "no padding entry" in run.stdout
    assert src.stat().st_ino != ino and stat.S_IMODE(src.stat().st_mode) == 0o640
    assert keys_in_order(src)[-1] == PAD and padding_is_spaces(src)
    md["general.name"] = "a much longer name than before"
    assert state(src) == (md, tensors)
    size, ino = src.stat().st_size, src.stat().st_ino

    # The name is the first entry after the architecture: the change spans every page of the tokens.
    run = edit(src, "--set", "general.name=x", "--set", "new.key=7:INT32", "--delete", "llama.rope.freq_base")
    assert run.stdout.startswith(f"edited {src} in place (padding last -> first"), run.stdout
    assert keys_in_order(src)[0] == PAD and padding_is_spaces(src)
    md.update({"general.name": "x", "new.key": 7})
    del md["llama.rope.freq_base"]
    assert state(src) == (md, tensors)

    run = edit(src, "--set", "general.name=y and a longer name")
    assert "in place (padding first -> last" in run.stdout, run.stdout
    assert keys_in_order(src)[-1] == PAD and padding_is_spaces(src)
    md["general.name"] = "y and a longer name"
    assert state(src) == (md, tensors)

    assert "unchanged" in edit(src, "--set", "general.name=y and a longer name").stdout
    assert (src.stat().st_size, src.stat().st_ino) == (size, ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf"]


def test_a_same_size_change_without_padding_is_one_write(tmp_path):
    src = tmp_path / "a.gguf"
    gguf_py_file(src)
    old = src.read_bytes()
    md, tensors = state(src)
    run = edit(src, "--set", "llama.context_length=4096", "--set", "general.name=TINY")
    assert run.stdout.startswith(f"edited {src} in place (one write of"), run.stdout
    new = src.read_bytes()
    assert len(new) == len(old) and sum(a != b for a, b in zip(old, new)) <= 6
    md.update({"llama.context_length": 4096, "general.name": "TINY"})
    assert state(src) == (md, tensors)
    assert PAD not in keys_in_order(src)


def test_the_streaming_writers_file_is_edited_in_place(tmp_path):
    src = tmp_path / "s.gguf"
    with ringsafe.gguf.Writer(src, {"general.architecture": "llama", "general.name": "s"}) as w:
        w.write("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    assert keys_in_order(src)[-1] == PAD
    md, tensors = state(src)
    run = edit(src, "--set", "general.name=streamed", "--set", "general.licence=mit")
    assert "in place" in run.stdout, run.stdout
    md.update({"general.name": "streamed", "general.licence": "mit"})
    assert state(src) == (md, tensors) and padding_is_spaces(src)


def test_no_room_rewrites_then_in_place_again(tmp_path):
    src = tmp_path / "a.gguf"
    gguf_py_file(src, tokens=10)
    edit(src, "--set", "general.name=b")  # a rewrite: 64 KiB of padding
    md, tensors = state(src)
    big = "z" * 100_000
    run = edit(src, "--set", f"general.description={big}")
    assert run.stdout.startswith("rewrote") and "no room in place" in run.stdout, run.stdout
    md["general.description"] = big
    assert state(src) == (md, tensors)
    run = edit(src, "--set", "general.description=short", "--set", "general.name=" + "n" * 5000)
    assert "in place (padding last -> first" in run.stdout, run.stdout
    md.update({"general.description": "short", "general.name": "n" * 5000})
    assert state(src) == (md, tensors) and padding_is_spaces(src)


def test_rewrite_flag_always_rewrites(tmp_path):
    src = tmp_path / "a.gguf"
    gguf_py_file(src, tokens=10)
    edit(src, "--set", "general.name=b")
    md, tensors = state(src)
    run = edit(src, "--set", "general.name=c", "--rewrite")
    assert run.stdout.startswith("rewrote") and "asked to rewrite" in run.stdout
    md["general.name"] = "c"
    assert state(src) == (md, tensors)


def test_refusals_leave_the_file_untouched(tmp_path):
    src = tmp_path / "a.gguf"
    gguf_py_file(src, tokens=10)
    edit(src, "--set", "general.name=b")  # with a padding entry
    old = src.read_bytes()
    for args, text in [(["--delete", "no.such.key"], "no such key"),
                       (["--set", f"{PAD}=x"], "padding"),
                       (["--set", "general.alignment=64:UINT32"], "alignment"),
                       (["--set", "llama.context_length=-1"], "UINT32"),
                       (["--set", "x=300:UINT8"], "UINT8"),
                       (["--set", "x=maybe:BOOL"], "BOOL")]:
        run = edit(src, *args, ok=False)
        assert run.returncode == 1 and text in run.stderr, (args, run.stderr)
        assert str(src) in run.stderr
    assert src.read_bytes() == old

    src.chmod(0o444)  # refused even for root, who could open it for writing
    run = edit(src, "--set", "general.name=c", ok=False)
    assert run.returncode == 1 and "read-only" in run.stderr
    assert src.read_bytes() == old

    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    run = edit(text, "--set", "a=b", ok=False)
    assert run.returncode == 1 and str(text) in run.stderr
    assert text.read_text() == "not a model\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "notes.txt"]


def test_a_split_part_is_refused(tmp_path):
    whole = tmp_path / "w.gguf"
    gguf_py_file(whole, tokens=10)
    parts = subprocess.run([str(CLI), "cp", str(whole), str(tmp_path / "s.gguf"), "--split-max-tensors", "2",
                            "--no-sync"], capture_output=True, text=True, timeout=120)
    assert parts.returncode == 0, parts.stderr
    first = tmp_path / "s-00001-of-00002.gguf"
    old = first.read_bytes()
    run = edit(first, "--set", "general.name=x", ok=False)
    assert run.returncode == 1 and "split" in run.stderr
    assert first.read_bytes() == old


# --- kill -9 at each step of an in-place edit ------------------------------------------------

def stalled(path, point, *args):
    """Runs an edit that stops at `point`, kills it there with SIGKILL; returns its stderr line."""
    env = dict(os.environ, RINGSAFE_EDIT_TEST_STALL=point)
    p = subprocess.Popen([str(CLI), "edit", str(path), *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stderr.readline()  # blocks until the child reached the point (or ended)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    p.stderr.close()
    return line, p.returncode


def padded(path):
    """A file with the padding entry last and ~40 KiB of tokens: a name change spans several pages."""
    gguf_py_file(path)
    edit(path, "--set", "general.name=start")


@pytest.mark.parametrize("point, new", [("prewrite", False), ("commit", False), ("cleanup", True)])
def test_kill_9_during_an_in_place_edit_leaves_the_old_or_the_new_file(tmp_path, point, new):
    src = tmp_path / "k.gguf"
    padded(src)
    for direction, value in [("last -> first", "first change"), ("first -> last", "second change!")]:
        before = state(src)
        line, rc = stalled(src, point, "--set", f"general.name={value}")
        assert line.strip() == f"ringsafe edit: stalled at {point}" and rc == -signal.SIGKILL, (line, rc)
        md, tensors = state(src)
        assert tensors == before[1]
        if new:
            assert md == dict(before[0], **{"general.name": value}), direction
        else:
            assert md == before[0], direction
        # The next edit goes through and leaves a clean file either way.
        run = edit(src, "--set", f"general.name={value}")
        assert ("stale bytes of the padding made spaces" if new else "padding") in run.stdout, run.stdout
        assert state(src) == (dict(before[0], **{"general.name": value}), before[1])
        assert padding_is_spaces(src)


def test_kill_9_of_a_one_write_edit_and_of_a_rewrite(tmp_path):
    src = tmp_path / "k.gguf"
    gguf_py_file(src, tokens=10)
    old = src.read_bytes()
    line, _ = stalled(src, "commit", "--set", "general.name=TINY")  # one write, not made
    assert "stalled at commit" in line and src.read_bytes() == old
    line, _ = stalled(src, "publish", "--set", "general.name=longer")  # a rewrite, not renamed
    assert "stalled at publish" in line and src.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.gguf"]


# --- safetensors -------------------------------------------------------------------------------

def st_state(path):
    with safe_open(str(path), "np") as f:
        md = f.metadata()
        tensors = {k: f.get_tensor(k).tobytes() for k in f.keys()}
    with ringsafe.safe_open(str(path), "np") as f:
        assert f.metadata() == md
        assert {k: f.get_tensor(k).tobytes() for k in f.keys()} == tensors
    assert all(isinstance(v, str) for v in (md or {}).values())
    return md, tensors


def st_file(path, n=3, metadata=None):
    rng = np.random.default_rng(4)
    st_save({f"layer.{i}.weight": rng.standard_normal((3, 4)).astype(np.float32) for i in range(n)}, str(path),
            metadata=metadata)


def test_safetensors_small_header_in_place(tmp_path):
    src = tmp_path / "m.safetensors"
    st_file(src, metadata={"format": "pt"})  # the reference's file: __metadata__ first, 8-byte padding only
    md, tensors = st_state(src)
    size, ino = src.stat().st_size, src.stat().st_ino
    run = edit(src, "--set", "format=np")  # same length: one write in the first page
    assert run.stdout.startswith(f"edited {src} in place (one write"), run.stdout
    assert (src.stat().st_size, src.stat().st_ino) == (size, ino)
    assert st_state(src) == ({"format": "np"}, tensors)
    run = edit(src, "--set", "x=1")  # no room: a rewrite with slack
    assert run.stdout.startswith("rewrote") and "outgrew" in run.stdout, run.stdout
    assert st_state(src) == ({"format": "np", "x": "1"}, tensors)
    size, ino = src.stat().st_size, src.stat().st_ino
    for args, want in [(["--set", "y=22"], {"format": "np", "x": "1", "y": "22"}),
                       (["--delete", "x"], {"format": "np", "y": "22"})]:
        run = edit(src, *args)
        assert run.stdout.startswith(f"edited {src} in place (one write"), run.stdout
        assert st_state(src) == (want, tensors)
    assert (src.stat().st_size, src.stat().st_ino) == (size, ino)


def test_safetensors_large_header_rewritten_then_in_place(tmp_path):
    src = tmp_path / "m.safetensors"
    st_file(src, n=400)  # a header of ~30 KiB, no __metadata__
    _, tensors = st_state(src)
    src.chmod(0o600)
    run = edit(src, "--set", "format=pt")
    assert run.stdout.startswith("rewrote"), run.stdout
    assert stat.S_IMODE(src.stat().st_mode) == 0o600
    assert st_state(src) == ({"format": "pt"}, tensors)
    header = src.read_bytes()[8:8 + int.from_bytes(src.read_bytes()[:8], "little")]
    assert header.rstrip(b" ").endswith(b'"__metadata__":{"format":"pt"}}')
    run = edit(src, "--set", "format=np", "--set", "note=" + "é" * 100)
    assert "in place" in run.stdout, run.stdout
    assert st_state(src) == ({"format": "np", "note": "é" * 100}, tensors)
    old = src.read_bytes()
    run = edit(src, "--set", "format=pt:UINT32", ok=False)
    assert run.returncode == 1 and "strings" in run.stderr
    assert edit(src, "--delete", "nope", ok=False).returncode == 1
    assert src.read_bytes() == old


def test_safetensors_kill_9_before_the_write_and_before_the_rename(tmp_path):
    src = tmp_path / "m.safetensors"
    st_file(src, n=400)
    edit(src, "--set", "format=pt")
    before = st_state(src)
    line, _ = stalled(src, "commit", "--set", "format=np")
    assert "stalled at commit" in line and st_state(src) == before
    line, _ = stalled(src, "publish", "--set", "big=" + "b" * 10000)
    assert "stalled at publish" in line and st_state(src) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]

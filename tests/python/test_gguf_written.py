"""Every GGUF file the C++ writer tests write, read back by gguf-py.

tests/write/test_gguf_writer.cpp (run here with RINGSAFE_GGUF_KEEP) copies
each file it writes, with a manifest of what it gave the writer: metadata
entries as their stored bytes, tensors as ggml type, ne and sha256. gguf-py's
GGUFReader must accept each file and read the same metadata and tensors back
(ggml's own reader is not in the test environment: gguf-py and the
conformance rules stand in for it).
"""

import hashlib
import json
import os
import pathlib
import subprocess

import pytest

gguf = pytest.importorskip("gguf")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / "build" / "tests" / "write" / "test_gguf_writer"
PADDING_KEY = "ringsafe.padding"
ARRAY = 9
STRING = 8


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built")
    out = tmp_path_factory.mktemp("gguf_written")
    env = dict(os.environ, RINGSAFE_GGUF_KEEP=str(out), RINGSAFE_SHARED=str(ROOT.parent / "shared"),
               RINGSAFE_CLI=str(ROOT / "build" / "tools" / "ringsafe"))
    run = subprocess.run([str(BINARY)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    files = sorted(out.glob("*.gguf"))
    assert len(files) >= 10, "the C++ tests kept fewer files than they write"
    return files


def field_bytes(field):
    return b"".join(field.parts[i].tobytes() for i in field.data)


def check_metadata(reader, expected):
    keys = [k for k in reader.fields if not k.startswith("GGUF.") and k != PADDING_KEY]
    assert keys == [bytes.fromhex(e["key"]).decode() for e in expected]
    for e in expected:
        key = bytes.fromhex(e["key"]).decode()
        field = reader.fields[key]
        assert int(field.types[0]) == e["type"], key
        data = bytes.fromhex(e["data"])
        if e["type"] == ARRAY:
            assert len(field.data) == e["count"], key
            if e["count"]:
                assert int(field.types[1]) == e["element_type"], key
            else:
                assert int(field.parts[-2][0]) == e["element_type"], key
        if e["element_type"] == STRING:
            offsets = e["offsets"]
            pieces = [data[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
            assert [field.parts[i].tobytes() for i in field.data] == pieces, key
        else:
            assert field_bytes(field) == data, key


def test_every_written_file_reads_back_equal_in_gguf_py(written):
    for path in written:
        manifest = json.loads(path.with_suffix(".json").read_text())
        reader = gguf.GGUFReader(path)
        check_metadata(reader, manifest["metadata"])
        tensors = {t.name: t for t in reader.tensors}
        assert len(tensors) == len(manifest["tensors"]), path.name
        for t in manifest["tensors"]:
            name = bytes.fromhex(t["name"]).decode()
            got = tensors[name]
            assert int(got.tensor_type) == t["type"], name
            ne = [int(d) for d in got.shape] if len(t["ne"]) else []
            assert ne == t["ne"] or (not t["ne"] and ne in ([], [1])), name
            assert hashlib.sha256(got.data.tobytes()).hexdigest() == t["sha256"], (path.name, name)
        padding = reader.fields.get(PADDING_KEY)
        if padding is not None:  # the streaming writer's slack: spaces only
            assert set(bytes(padding.parts[padding.data[0]])) <= {0x20}

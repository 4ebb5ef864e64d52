"""Typed user code for the type checker, never run: tests/python/test_types.py
runs mypy over it with the built package. It calls the public API as the
READMEs show and pins each result's type with assert_type; the calls in
``rejected()`` are misuse that mypy must report, each marked with the error
code it must give (``# type: ignore[code]``: with warn_unused_ignores, a
misuse that mypy accepts fails the run, and test_types.py checks each is
reported without the comment)."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from transformers import PreTrainedModel
from typing_extensions import assert_type

import ringsafe
import ringsafe.distributed as rd
import ringsafe.gguf
import ringsafe.lowlevel
import ringsafe.numpy
import ringsafe.torch
import ringsafe.transformers
from ringsafe.torch import iter_tensors, load_file, load_model, read_into, save_file


def torch_api(path: str) -> None:
    tensors = {"embed.weight": torch.randn(1000, 64), "norm.weight": torch.ones(64)}
    save_file(tensors, path, metadata={"format": "pt"}, sync=True, progress=lambda done, total: None)
    assert_type(load_file(path), dict[str, torch.Tensor])
    assert_type(load_file(path, backend="pread", threads=4, direct=True), dict[str, torch.Tensor])
    assert_type(load_file(path, "cuda:0", select=["norm.*"], progress=True), dict[str, torch.Tensor])
    assert_type(load_file(io.BytesIO(ringsafe.torch.save(tensors))), dict[str, torch.Tensor])
    assert_type(load_file("s3://bucket/model.safetensors", connections=16, s3_region="eu-west-1"),
                dict[str, torch.Tensor])
    assert_type(load_file("hf://acme/tiny-llama", token="hf_x", headers={"X-A": "b"}, cache=True),
                dict[str, torch.Tensor])

    dst = {"norm.weight": torch.empty(64)}
    assert_type(read_into(path, dst, direct=False), dict[str, torch.Tensor])
    stream = iter_tensors(path, memory_limit=64 << 20, select="embed.*")
    assert_type(stream, Iterator[tuple[str, torch.Tensor]])
    for name, t in stream:
        assert_type(name, str)
        assert_type(t, torch.Tensor)

    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(1000, 64)
    missing, unexpected = load_model(model, path, strict=False, backend="mmap")
    assert_type(missing, set[str])
    assert_type(unexpected, list[str])
    ringsafe.torch.save_model(model, path, metadata={"format": "pt"}, force_contiguous=False)

    data = ringsafe.torch.save(tensors, {"format": "pt"})
    assert_type(data, bytes)
    assert_type(ringsafe.torch.load(data), dict[str, torch.Tensor])


def safe_open_api(path: str) -> None:
    with ringsafe.safe_open(path, framework="pt", device="cpu", backend="pread", threads=2) as f:
        assert_type(f, ringsafe.safe_open)
        assert_type(f.keys(), list[str])
        assert_type(f.offset_keys(), list[str])
        assert_type(f.metadata(), dict[str, str] | None)
        whole: torch.Tensor = f.get_tensor("embed.weight")
        part = f.get_slice("embed.weight")
        assert_type(part, ringsafe.TensorSlice)
        assert_type(part.get_shape(), list[int])
        assert_type(part.get_dtype(), str)
        rows: torch.Tensor = part[250:500]
        assert_type(f.get_tensors(), dict[str, Any])
        f.read_into({"embed.weight": whole})
    with ringsafe._safe_open_handle(open(path, "rb"), "np") as g:
        array: NDArray[np.float32] = g.get_tensor("embed.weight")
    del rows, array


def numpy_api(path: str) -> None:
    arrays = {"a": np.zeros((2, 3), dtype=np.float32)}
    ringsafe.numpy.save_file(arrays, path, metadata={"k": "v"})
    assert_type(ringsafe.numpy.load_file(path, select=["a"]), dict[str, NDArray[Any]])
    assert_type(ringsafe.numpy.load(ringsafe.numpy.save(arrays)), dict[str, NDArray[Any]])
    assert_type(ringsafe.numpy.read_into(path, arrays), dict[str, NDArray[Any]])
    for name, a in ringsafe.numpy.iter_tensors(path, memory_limit=1 << 20):
        assert_type(a, NDArray[Any])


def writer_and_reference_api(path: str) -> None:
    with ringsafe.Writer(path, metadata={"format": "pt"}, expected_tensors=2, sync=False) as w:
        w.write("a", torch.zeros(3))
        w.write("b", np.ones(4, dtype=np.int64))
        w.write_bytes("c", "F32", [2], bytes(8))
    appending = ringsafe.Writer(path, append=True)
    assert_type(appending.path, str)
    stats = appending.finish()
    assert_type(stats["file_size"], int)
    assert_type(stats["relocation"], str)

    buf = bytearray(8)
    spec = ringsafe.TensorSpec(dtype="float32", shape=[2], data_ptr=id(buf), data_len=8)
    assert_type(spec.dtype, str)
    assert_type(spec.shape, list[int])
    blob = ringsafe.serialize({"x": spec}, metadata={"k": "v"})
    assert_type(blob, bytes)
    ringsafe.serialize_file({"x": spec}, path)
    assert_type(ringsafe.deserialize(blob), list[tuple[str, dict[str, Any]]])


def engine_api(path: str) -> None:
    reader = ringsafe.Reader(path, threads=2, queue_depth=64)
    info = reader.tensors()[0]
    assert_type(info, ringsafe._ringsafe.TensorInfo)
    assert_type(info.name, str)
    assert_type(info.shape, tuple[int, ...])
    assert_type(info.nbytes, int)
    shard = reader.shards()[info.shard]
    assert_type(shard, ringsafe._ringsafe.ShardInfo)
    assert_type(shard.spec, str)
    assert_type(shard.data_start, int)
    dst = bytearray(info.nbytes)
    plan = reader.plan_tensors([info.name], [dst])
    assert_type(plan.total_bytes, int)
    reader.execute(plan, progress=lambda done, total: None)
    reader.start(reader.plan_requests([(info.name, [(0, 1)], memoryview(dst))])).wait()
    request = ringsafe.TensorRequest(info.name, [(0, 1)], memoryview(dst))
    assert_type(request.name, str)
    reader.execute(reader.plan_requests([request, ringsafe.TensorRequest(name=info.name, box=[], buffer=dst)]))
    arena = ringsafe.Arena(1 << 20, huge=False)
    plan = ringsafe.lowlevel.plan_tensors_at(reader, [info.name], [(arena.address, info.nbytes)], keep=[arena])
    span = ringsafe.lowlevel.MemorySpan(arena.address, info.nbytes)
    assert_type(span.size, int)
    plan = ringsafe.lowlevel.plan_tensors_at(reader, [info.name], [span], keep=[arena])
    addressed = ringsafe.lowlevel.AddressedRequest(info.name, [(0, 1)], arena.address, 4)
    assert_type(addressed.box, Sequence[tuple[int, int]])
    ringsafe.lowlevel.plan_requests_at(reader, [addressed, (info.name, [(0, 1)], arena.address, 4)], keep=[arena])
    assert_type(ringsafe.arena_cache_stats()["hits"], int)
    ringsafe.set_arena_cache(limit=0, idle_seconds=1.5)
    ringsafe.trim_arena_cache()
    reader.close()

    # The engine's other results are records, read by name.
    parsed = ringsafe._ringsafe.parse_bytes(ringsafe.torch.save({"a": torch.zeros(2)}))
    assert_type(parsed, ringsafe._ringsafe.ParsedHeader)
    assert_type(parsed.tensors, list[ringsafe._ringsafe.TensorInfo])
    assert_type(parsed.metadata, dict[str, str] | None)
    assert_type(parsed.data_start, int)
    mapped = ringsafe._ringsafe.MappedFile(path)
    populated = mapped.populate([(0, mapped.size)], threads=2)
    assert_type(populated, ringsafe._ringsafe.PopulateStats)
    assert_type(populated.cold_bytes, int)
    assert_type(mapped.copy_to([(0, 8, bytearray(8))]).threads, int)
    from ringsafe._described import FileRange, RangeCopy
    ranges = [FileRange(0, 8), FileRange(offset=8, length=8)]
    assert_type(mapped.populate(ranges).bytes, int)
    copies = [RangeCopy(0, 8, bytearray(8))]
    assert_type(copies[0].length, int)
    assert_type(mapped.copy_to(copies, threads=2).bytes, int)
    fetched = ringsafe._ringsafe.fetch_file(path, connections=4)
    assert_type(fetched.data, bytes)
    assert_type(fetched.name, str)
    cuda = ringsafe._ringsafe.cuda_runtime_available()
    assert_type(cuda, ringsafe._ringsafe.CudaRuntime)
    assert_type(cuda.available, bool)
    assert_type(cuda.reason, str)
    counts = ringsafe._ringsafe.read_to_device_at(ringsafe._ringsafe.Reader(path), ["a"], [(0, 0)], stand_in=True)
    ringsafe.lowlevel.read_to_device_at(ringsafe.Reader(path), ["a"], [ringsafe.lowlevel.MemorySpan(0, 0)])
    assert_type(counts["staged_bytes"], int)

    ringsafe.install()
    assert_type(ringsafe.installed(), bool)
    ringsafe.uninstall()
    try:
        load_file(path)
    except ringsafe.SafetensorError as e:
        assert_type(e.kind, str | None)


def package_records(path: str) -> None:
    # The records the package's own modules hand each other (not an API): typed, so mypy checks their uses.
    from ringsafe._described import CallerTensor, FreshTensor
    from ringsafe._frameworks import adapter_for
    from ringsafe._index import IndexPlan, plan_index
    from ringsafe._memory import ArenaLayout, file_layout_arena, new_packed_arena
    from ringsafe._described import DescribedTensor
    from ringsafe._model import KeyMatch, match_keys
    from ringsafe._numpy_adapter import ADAPTER as NP_ADAPTER
    from ringsafe._write import describe_all
    from ringsafe._torch_adapter import ADAPTER

    described = adapter_for("pt").describe(torch.zeros(3), "a")
    assert_type(described, CallerTensor)
    assert_type(described.shape, list[int])
    assert_type(described.address, int)
    assert_type(ADAPTER.describe(torch.zeros(3), "a", for_write=False).nbytes, int)
    assert_type(ADAPTER.shape_of("F4", [2, 4], "a"), list[int])
    plan = plan_index((slice(1, 3), 0), [4, 5])
    assert_type(plan, IndexPlan)
    assert_type(plan.box, list[tuple[int, int]])
    assert_type(plan.flips, list[int])
    fresh = ADAPTER.fresh("F32", [3], 12, "a")
    assert_type(fresh, FreshTensor)
    assert_type(fresh.address, int)
    assert_type(NP_ADAPTER.fresh("F32", [3], 12, "a").address, int)
    layout = new_packed_arena([8, 24])
    assert_type(layout, ArenaLayout)
    assert_type(layout.arena, ringsafe.Arena)
    assert_type(file_layout_arena(ringsafe.Reader(path).tensors(), 0), ArenaLayout | None)
    model = torch.nn.Linear(2, 2)
    keys = match_keys(model, model.state_dict(), {}, strict=False)
    assert_type(keys, KeyMatch)
    assert_type(keys.missing, set[str])
    assert_type(keys.unexpected, list[str])
    described_all = describe_all(NP_ADAPTER, {"a": np.zeros(3)})
    assert_type(described_all, list[DescribedTensor])
    assert_type(described_all[0].shape, list[int])
    assert_type(described_all[0].nbytes, int)
    ringsafe._ringsafe.serialize([DescribedTensor("a", "F32", [1], 0, 4)])
    from ringsafe._described import GGUFEntry
    from ringsafe._gguf_write import _entries
    entry = _entries({"general.name": "x"})[0]
    assert_type(entry, GGUFEntry)
    assert_type(entry.element_type, str | None)


def distributed_api(url: str) -> None:
    state = rd.load_file(url, shard={"*.q_proj.weight": 0, "*.o_proj.weight": [(0, 128)]}, memory_limit=1 << 28)
    assert_type(state, dict[str, torch.Tensor])
    stats: dict[str, Any] = {}
    rd.read_into(url, state, shard=lambda name, shape: 0 if len(shape) > 1 else None, stats=stats)
    missing, unexpected = rd.load_model(torch.nn.Linear(2, 2), url, strict=False, connections=4)
    assert_type(missing, set[str])


def transformers_api() -> None:
    model = ringsafe.transformers.from_pretrained("hf://acme/tiny-llama", dtype=torch.bfloat16, cache=True)
    assert_type(model, PreTrainedModel)


def gguf_api(path: str) -> None:
    with ringsafe.gguf.open(path, connections=8, split_set=True) as f:
        assert_type(f, ringsafe.gguf.GGUFFile)
        assert_type(f.metadata, dict[str, Any])
        t = f.tensors[0]
        assert_type(t, ringsafe.gguf.GGUFTensor)
        assert_type(t.ne, tuple[int, ...])
        f.get_tensor(t.name, dtype=torch.bfloat16)
        f.get_tensor(t.name, raw=True, framework="np")
    ringsafe.gguf.load_file(path, select=lambda t: t.type == "Q8_0", dtype="F16")
    res = ringsafe.gguf.convert(path, "model.safetensors", dtype=torch.bfloat16, max_shard_size="5G", connections=4)
    assert_type(res, ringsafe.ConvertResult)
    assert_type(res.files, tuple[str, ...])
    ringsafe.convert("model.safetensors", "model.gguf", select=["model.*"], split_max_tensors=100,
                     progress=lambda done, total: None)
    stats = ringsafe._ringsafe.convert(path, "model.safetensors", dtype="BF16")
    assert_type(stats, ringsafe._ringsafe.ConvertStats)
    assert_type(stats.files, list[str])
    assert_type(stats.seconds, float)
    reader = ringsafe._ringsafe.Reader(path)
    header = ringsafe._ringsafe.gguf_header(reader)
    assert_type(header, ringsafe._ringsafe.GGUFHeader)
    assert_type(header.alignment, int)
    assert_type(header.metadata[0], ringsafe._ringsafe.GGUFMetadataEntry)
    assert_type(header.metadata[0].element_type, str | None)
    info = ringsafe._ringsafe.gguf_tensors(reader)[0]
    assert_type(info, ringsafe._ringsafe.GGUFTensorInfo)
    assert_type(info.shape, tuple[int, ...])
    assert_type(info.shard, int)


def rejected(path: str) -> None:
    tensors = {"a": torch.zeros(3)}
    ringsafe.gguf.open(path, conections=8)  # type: ignore[call-arg]
    ringsafe.gguf.load_file(path, framework="jax")  # type: ignore[arg-type]
    ringsafe.convert(path, "x.gguf", split_max_tensors="100")  # type: ignore[arg-type]
    ringsafe.convert(path, "x.gguf", conections=8)  # type: ignore[call-arg]
    load_file(123)  # type: ignore[arg-type]
    load_file(path, thread=4)  # type: ignore[call-arg]
    load_file(path, threads="4")  # type: ignore[arg-type]
    load_file(path, backend="mmapp")  # type: ignore[arg-type]
    save_file(tensors, path, metadata={"a": 1})  # type: ignore[dict-item]
    save_file({"a": np.zeros(3)}, path)  # type: ignore[dict-item]
    ringsafe.numpy.save_file(tensors, path)  # type: ignore[arg-type]
    ringsafe.safe_open(path, "pt", select=1)  # type: ignore[arg-type]
    ringsafe.Writer(path, sync="yes")  # type: ignore[arg-type]
    ringsafe.Reader(path).tensors()[0].size  # type: ignore[attr-defined]
    ringsafe.Reader(path).shards()[0][2]  # type: ignore[index]
    ringsafe._ringsafe.parse_bytes(bytes(8))[0]  # type: ignore[index]
    ringsafe._ringsafe.MappedFile(path).populate([(0, 8)])[1]  # type: ignore[index]
    ringsafe._ringsafe.fetch_file(path).data.name  # type: ignore[attr-defined]
    ringsafe._ringsafe.cuda_runtime_available()[0]  # type: ignore[index]
    ringsafe._ringsafe.gguf_tensors(ringsafe._ringsafe.Reader(path))[0][1]  # type: ignore[index]
    ringsafe._ringsafe.serialize([("a", "F32", [1], 0, 4)])  # type: ignore[list-item]
    ringsafe.lowlevel.MemorySpan("0", 8)  # type: ignore[arg-type]
    ringsafe.lowlevel.MemorySpan(0, 8).size = 4  # type: ignore[misc]
    ringsafe.TensorRequest("a", [(0, 1)])  # type: ignore[call-arg]
    ringsafe.TensorRequest("a", [0, 1], bytearray(4))  # type: ignore[list-item]
    ringsafe._ringsafe.MappedFile(path).populate([ringsafe.lowlevel.MemorySpan(0, 8)])  # type: ignore[list-item]
    ringsafe._ringsafe.MappedFile(path).copy_to([(0, 8)])  # type: ignore[list-item]
    ringsafe.lowlevel.plan_tensors_at(ringsafe.Reader(path), ["a"], [(0, 8, 1)])  # type: ignore[list-item]
    ringsafe.Reader(path).plan_requests([ringsafe.lowlevel.AddressedRequest("a", [], 0, 8)])  # type: ignore[list-item]
    rd.load_file(path, shard="0")  # type: ignore[arg-type]

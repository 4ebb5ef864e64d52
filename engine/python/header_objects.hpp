// Header values as the Python objects the Reader and the in-memory parsers
// hand out (engine-internal, the Python front end only).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ringsafe/header.hpp"

namespace ringsafe::python {

// One tensor of a header as Python sees it: ringsafe._ringsafe.TensorInfo, a
// read-only record (name, dtype, shape as a tuple, begin and end relative to
// its shard's data section, nbytes = end - begin, shard: its index in a
// sharded checkpoint, 0 otherwise). Registered by bind_header.
struct tensor_record {
    std::string name;
    std::string dtype;
    pybind11::tuple shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    std::uint32_t shard = 0;
};

inline pybind11::object tensor_object(const tensor_info& t, std::uint32_t shard) {
    pybind11::tuple shape(t.shape.size());
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape[i] = pybind11::int_(t.shape[i]);
    return pybind11::cast(tensor_record{t.name, std::string(dtype_name(t.dtype)), std::move(shape), t.begin, t.end, shard});
}

// What a file was when it was opened, as Python sees it:
// ringsafe._ringsafe.FileStat, a read-only record (device and inode: which
// file, st_dev and st_ino; size; mtime_ns: st_mtime_ns). ShardInfo.stat and
// MappedFile.stat hand them out (a URL's: device, inode and mtime_ns 0);
// registered by bind_header.
struct file_stat_record {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
};

// One shard of a checkpoint as Python sees it: ringsafe._ringsafe.ShardInfo, a
// read-only record (spec: its resolved path or URL as a str, os.fsdecode'd;
// size: the file's bytes; data_start: 8 + N, where its data section begins;
// stat: the file as the reader opened it, its size equal to size).
// Reader.shards() hands them out; registered by bind_header.
struct shard_record {
    pybind11::str spec;
    std::uint64_t size = 0;
    std::uint64_t data_start = 0;
    file_stat_record stat;
};

// __metadata__ as a dict of str, or None.
inline pybind11::object metadata_object(const std::optional<metadata_map>& md) {
    if (!md) return pybind11::none();
    pybind11::dict d;
    for (const auto& [k, v] : *md) d[pybind11::str(k)] = pybind11::str(v);
    return d;
}

}  // namespace ringsafe::python

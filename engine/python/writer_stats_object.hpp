// What a writer did (ringsafe/writer.hpp's writer_stats) as the dict both
// Python writers' finish() returns (engine-internal, the Python front end only).
#pragma once

#include <pybind11/pybind11.h>

#include "ringsafe/writer.hpp"

namespace ringsafe::python {

// {tensors, data_bytes, file_size, header_reserved, <header_key>, direct,
// relocation}: `header_key` names the header's bytes as each format's writer
// reports them ("header_json" for safetensors' JSON, "header_bytes" for GGUF's).
inline pybind11::dict writer_stats_dict(const writer_stats& s, const char* header_key) {
    pybind11::dict d;
    d["tensors"] = s.tensors;
    d["data_bytes"] = s.data_bytes;
    d["file_size"] = s.file_size;
    d["header_reserved"] = s.header_reserved;
    d[header_key] = s.header_json;
    d["direct"] = s.direct;
    d["relocation"] = s.relocation;
    return d;
}

}  // namespace ringsafe::python

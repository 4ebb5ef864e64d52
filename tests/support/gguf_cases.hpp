// The GGUF conformance cases (../shared/conformance-gguf/{valid,invalid}/expected.jsonl)
// as C++ values: ggml's verdicts, metadata, tensor records and hashes.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ringsafe::test {

// ../shared/conformance-gguf.
std::filesystem::path gguf_conformance_dir();

struct gguf_expected_tensor {
    std::string name;
    std::string type;  // gguf-py's GGMLQuantizationType name ("Q4_K")
    std::uint32_t type_id = 0;
    std::vector<std::uint64_t> shape, ne;
    std::uint64_t offset = 0, nbytes = 0;
    std::string sha256;
    std::optional<std::string> dequant_f32_sha256;
};

struct gguf_expected_entry {
    std::string key;
    std::string type;                         // "UINT32", ..., "ARRAY"
    std::optional<std::string> element_type;  // arrays
    boost::json::value value;                 // as expected.jsonl has it (a STRING ends at its first NUL)
};

struct gguf_expected_split {
    std::uint64_t no = 0, count = 0, tensors_count = 0;
};

// One line of expected.jsonl.
struct gguf_case {
    std::filesystem::path path;  // the .gguf file
    std::string file;
    bool ok = false;
    bool quirk = false;
    // Invalid cases.
    std::string error_kind;
    bool header_ok = false;  // ggml's header pass alone accepted it (DataPastEnd)
    // Valid cases.
    std::uint32_t version = 0, alignment = 0;
    std::uint64_t data_offset = 0;
    std::vector<gguf_expected_entry> metadata;  // file order
    std::vector<gguf_expected_tensor> tensors;  // tensor-info order
    std::optional<gguf_expected_split> split;
};

// Reads `dir`/expected.jsonl (dir is gguf_conformance_dir()/"valid" or "invalid").
std::vector<gguf_case> load_gguf_cases(const std::filesystem::path& dir);

// Every case, valid then invalid.
std::vector<gguf_case> all_gguf_cases();

// Whether `actual` (a metadata value or element as JSON: integers exact,
// floats as doubles, a string whole) equals `expected` as expected.jsonl
// writes it: integral floats may be JSON integers there, and strings end at
// their first NUL (ggml's C string).
bool gguf_value_matches(const boost::json::value& actual, const boost::json::value& expected);

}  // namespace ringsafe::test

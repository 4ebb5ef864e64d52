// The shared conformance cases (../shared/conformance/{valid,invalid}/expected.jsonl)
// as C++ values, and ringsafe's named deviations from the reference's verdicts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringsafe::test {

struct expected_tensor {
    std::string name;
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0, end = 0;
    std::string sha256;
};

// One line of expected.jsonl.
struct expected_case {
    std::filesystem::path path;  // the .safetensors file
    std::string file;
    bool ok = false;
    bool quirk = false;
    bool reference_writer = false;
    std::string error_kind;                 // invalid cases
    std::vector<expected_tensor> tensors;   // valid cases, in data order
    std::optional<std::map<std::string, std::string>> metadata;
};

// Reads `dir`/expected.jsonl (dir is conformance_dir()/"valid" or "invalid").
std::vector<expected_case> load_cases(const std::filesystem::path& dir);

// Names of the *.safetensors files in `dir`, sorted.
std::vector<std::string> safetensors_files(const std::filesystem::path& dir);

// A case where ringsafe deliberately differs from the reference.
struct deviation {
    std::string_view file;
    std::string_view error_kind;  // what ringsafe reports instead
    std::string_view reason;
};

// Every deviation, by file name; nullptr when the case must match exactly.
const deviation* find_deviation(std::string_view file);

}  // namespace ringsafe::test

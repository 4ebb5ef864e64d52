// libFuzzer target: the safetensors header parser and validator on arbitrary
// file bytes. Besides "no crash, no UB, no leak", every accepted header must
// satisfy the format's invariants, and serializing it must parse back to the
// same tensors.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_check.hpp"
#include "ringsafe/header.hpp"

namespace {

void check_invariants(const ringsafe::header& h, std::size_t file_size) {
    FUZZ_CHECK(h.file_size() == file_size);
    FUZZ_CHECK(h.by_name.size() == h.tensors.size());
    std::uint64_t expected_begin = 0;
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
        const auto& t = h.tensors[i];
        FUZZ_CHECK(t.begin <= t.end);
        FUZZ_CHECK(t.begin == expected_begin);  // contiguous, in data order
        expected_begin = t.end;
        auto bytes = ringsafe::dtype_bytes_for(t.dtype, t.elements());
        FUZZ_CHECK(bytes && *bytes == t.size());
        const auto* found = h.find(t.name);
        FUZZ_CHECK(found && found->name == t.name && found->begin == t.begin && found->end == t.end);
    }
    FUZZ_CHECK(expected_begin == h.data_size);
}

void check_round_trip(const ringsafe::header& h) {
    std::vector<ringsafe::tensor_entry> entries;
    for (const auto& t : h.tensors) entries.push_back({t.name, t.dtype, t.shape, t.begin, t.end});
    const ringsafe::metadata_map* md = h.metadata ? &*h.metadata : nullptr;
    std::string json = ringsafe::serialize_header(entries, md);
    auto again = ringsafe::parse_header(json, 8 + json.size() + h.data_size);
    FUZZ_CHECK(again.tensors.size() == h.tensors.size());
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
        const auto &a = h.tensors[i], &b = again.tensors[i];
        FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin &&
                   a.end == b.end);
    }
    FUZZ_CHECK(again.metadata == h.metadata);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto bytes = std::as_bytes(std::span(data, size));
    ringsafe::header h;
    try {
        h = ringsafe::parse_file(bytes);
    } catch (const ringsafe::error&) {
        return 0;  // rejected with a ringsafe error: fine
    }
    check_invariants(h, size);
    check_round_trip(h);
    return 0;
}

// libFuzzer target: the GGUF parser on arbitrary file bytes, whole and fed in
// pieces. Besides "no crash, no UB, no leak": each prefix is its own heap
// buffer of exactly its length, so a read past what the parser was given is an
// ASan error; pieces give the verdict of the whole; an accepted header has
// offsets that are the running padded sum, sizes that match ne and type, and
// serializes to its own bytes, which parse back to the same header.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "ringsafe/gguf.hpp"

namespace {

using namespace ringsafe;

// The verdict and, when accepted, the header.
struct outcome {
    std::string kind;  // "" when accepted
    gguf::header h;
};

outcome whole(std::span<const std::byte> bytes) {
    outcome o;
    try {
        o.h = gguf::parse(bytes);
    } catch (const error& e) {
        o.kind = std::string(e.kind());
    }
    return o;
}

// Fed in prefixes growing by `step`, each copied to a buffer of its own size.
outcome pieces(std::span<const std::byte> bytes, std::size_t step) {
    outcome o;
    try {
        gguf::parser p(bytes.size());
        for (std::size_t have = std::min(step, bytes.size());; have = std::min(have + step, bytes.size())) {
            std::vector<std::byte> copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(have));
            const gguf::progress pr = p.feed(copy);
            if (pr.done) {
                o.h = p.finish();
                break;
            }
            FUZZ_CHECK(have < bytes.size());
            FUZZ_CHECK(pr.need > have && pr.need <= pr.estimate && pr.estimate <= bytes.size());
        }
    } catch (const error& e) {
        o.kind = std::string(e.kind());
    }
    return o;
}

bool same_header(const gguf::header& a, const gguf::header& b) {
    if (a.version != b.version || a.alignment != b.alignment || a.data_offset != b.data_offset ||
        a.data_size != b.data_size || a.info_end != b.info_end || a.metadata.size() != b.metadata.size() ||
        a.tensors.size() != b.tensors.size())
        return false;
    for (std::size_t i = 0; i < a.metadata.size(); ++i) {
        const auto &x = a.metadata[i], &y = b.metadata[i];
        if (x.key != y.key || x.type != y.type || x.element_type != y.element_type || x.count != y.count ||
            x.data != y.data || x.offsets != y.offsets)
            return false;
    }
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        const auto &x = a.tensors[i], &y = b.tensors[i];
        if (x.name != y.name || x.ggml != y.ggml || x.dtype != y.dtype || !(x.shape == y.shape) ||
            x.begin != y.begin || x.end != y.end)
            return false;
    }
    return true;
}

void check_invariants(const gguf::header& h, std::span<const std::byte> bytes) {
    FUZZ_CHECK(h.data_offset + h.data_size <= bytes.size());
    FUZZ_CHECK(h.info_end <= h.data_offset);
    FUZZ_CHECK(h.tensors.empty() ? h.data_offset == h.info_end : h.data_offset % h.alignment == 0);
    FUZZ_CHECK(h.by_name.size() == h.tensors.size() && h.by_key.size() == h.metadata.size());
    std::uint64_t sum = 0;
    for (const tensor_info& t : h.tensors) {
        FUZZ_CHECK(t.begin == sum);  // the running padded sum
        FUZZ_CHECK(t.shape.size() <= gguf::max_dims && t.name.size() <= gguf::max_name_length);
        const auto bytes_of = ggml_bytes_for(t.ggml, t.elements());
        FUZZ_CHECK(t.elements() == 0 ? t.size() == 0 : bytes_of && *bytes_of == t.size());
        sum += (t.size() + h.alignment - 1) / h.alignment * h.alignment;
        FUZZ_CHECK(h.find(t.name) != nullptr);
    }
    FUZZ_CHECK(sum == h.data_size);
    for (const gguf::metadata_entry& e : h.metadata) {
        FUZZ_CHECK(h.find_key(e.key) == &e);
        for (std::uint64_t i = 0; i < e.count; ++i) e.value(i);
    }
    try {
        h.split();
    } catch (const error& e) {
        FUZZ_CHECK(e.code() == errc::InvalidIndex);
    }
}

void check_round_trip(const gguf::header& h, std::span<const std::byte> bytes) {
    const std::string out = gguf::serialize(h.metadata, gguf::records_of(h), h.alignment, h.version);
    FUZZ_CHECK(out.size() >= h.info_end && std::memcmp(out.data(), bytes.data(), h.info_end) == 0);
    std::vector<std::byte> file(out.size() + h.data_size);
    std::memcpy(file.data(), out.data(), out.size());
    const gguf::header again = gguf::parse(file);
    FUZZ_CHECK(same_header(h, again));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                       reinterpret_cast<const std::byte*>(data) + size);
    const outcome all = whole(bytes);
    const std::size_t step = size ? 1 + data[size - 1] % 61 : 1;
    const outcome cut = pieces(bytes, step);
    FUZZ_CHECK(all.kind == cut.kind);
    if (!all.kind.empty()) return 0;
    FUZZ_CHECK(same_header(all.h, cut.h));
    check_invariants(all.h, bytes);
    check_round_trip(all.h, bytes);
    return 0;
}

// Data order, duplicate names, and the reference's per-tensor layout checks.
#include "format/safetensors/validate.hpp"

#include <algorithm>

namespace ringsafe::format {
namespace {

bool data_order_less(const tensor_info& a, const tensor_info& b) noexcept {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
}

// Sorts by (begin, end, name). Headers written by a writer are usually in data
// order already, which costs one pass; otherwise sort indices, then move.
void sort_data_order(std::vector<tensor_info>& tensors) {
    if (std::is_sorted(tensors.begin(), tensors.end(), data_order_less)) return;
    // Compact keys keep the comparisons in cache; names are looked at only for ties.
    struct key {
        std::uint64_t begin, end;
        std::uint32_t index;
    };
    std::vector<key> keys(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i)
        keys[i] = {tensors[i].begin, tensors[i].end, static_cast<std::uint32_t>(i)};
    std::sort(keys.begin(), keys.end(), [&](const key& a, const key& b) {
        if (a.begin != b.begin) return a.begin < b.begin;
        if (a.end != b.end) return a.end < b.end;
        return tensors[a.index].name < tensors[b.index].name;
    });
    // Permute in place, cycle by cycle: no second table of tensors.
    std::vector<bool> placed(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (placed[i]) continue;
        tensor_info held = std::move(tensors[i]);
        std::size_t j = i;
        for (;;) {
            placed[j] = true;
            std::size_t from = keys[j].index;
            if (from == i) break;
            tensors[j] = std::move(tensors[from]);
            j = from;
        }
        tensors[j] = std::move(held);
    }
}

bool fail(status& st, errc e, std::string msg) {
    st.code = e;
    st.message = std::move(msg);
    return false;
}

std::string describe(const tensor_info& t) {
    return "tensor '" + t.name + "' (" + std::string(dtype_name(t.dtype)) + ", shape " +
           format_dims(t.shape.data(), t.shape.size()) + ")";
}

std::string offsets_of(const tensor_info& t) {
    const std::uint64_t o[2] = {t.begin, t.end};
    return format_dims(o, 2);
}

// The reference's per-tensor checks; `start` is where the previous tensor ended.
bool check_tensor(const tensor_info& t, std::uint64_t start, status& st) {
    if (t.begin != start)
        return fail(st, errc::InvalidOffset,
                    "tensor '" + t.name + "' data_offsets " + offsets_of(t) +
                        " does not start where the previous tensor ended (" + std::to_string(start) + ")");
    if (t.end < t.begin)
        return fail(st, errc::InvalidOffset,
                    "tensor '" + t.name + "' data_offsets " + offsets_of(t) + " end before they begin");
    std::uint64_t elements = 1;  // running product, left to right, like the reference
    for (std::uint64_t d : t.shape)
        if (__builtin_mul_overflow(elements, d, &elements))
            return fail(st, errc::ValidationOverflow, describe(t) + ": the element count overflows 64 bits");
    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(elements, std::uint64_t{dtype_bits(t.dtype)}, &bits))
        return fail(st, errc::ValidationOverflow,
                    describe(t) + ": the size in bits (" + std::to_string(elements) + " x " +
                        std::to_string(dtype_bits(t.dtype)) + ") overflows 64 bits");
    if (bits % 8 != 0)
        return fail(st, errc::MisalignedSlice,
                    describe(t) + " is " + std::to_string(bits) + " bits, not a whole number of bytes");
    if (t.end - t.begin != bits / 8)
        return fail(st, errc::TensorInvalidInfo,
                    describe(t) + " needs " + std::to_string(bits / 8) + " bytes but data_offsets " +
                        offsets_of(t) + " span " + std::to_string(t.end - t.begin));
    return true;
}

}  // namespace

std::string format_dims(const std::uint64_t* dims, std::size_t count) {
    std::string s = "[";
    for (std::size_t i = 0; i < count; ++i) {
        if (i) s += ',';
        s += std::to_string(dims[i]);
    }
    return s + "]";
}

bool validate_layout(header& h, std::uint64_t file_size, status& st) {
    if (h.tensors.size() > UINT32_MAX)
        return fail(st, errc::InvalidHeaderDeserialization, "more than 2^32-1 tensors");
    sort_data_order(h.tensors);
    h.build_name_index();
    for (std::size_t i = 1; i < h.by_name.size(); ++i) {
        const tensor_info& t = h.tensors[h.by_name[i]];
        if (t.name == h.tensors[h.by_name[i - 1]].name)
            return fail(st, errc::DuplicateTensorName,
                        "tensor name '" + t.name + "' appears more than once in the header");
    }
    std::uint64_t start = 0;
    for (const tensor_info& t : h.tensors) {
        if (!check_tensor(t, start, st)) return false;
        start = t.end;
    }
    h.data_size = start;
    std::uint64_t covered = 0;
    bool overflow = __builtin_add_overflow(8 + h.header_size, start, &covered);
    if (overflow || covered != file_size)
        return fail(st, errc::MetadataIncompleteBuffer,
                    "the tensors end at data offset " + std::to_string(start) + " but the data section is " +
                        (file_size >= 8 + h.header_size ? std::to_string(file_size - 8 - h.header_size)
                                                        : std::string("missing")) +
                        " bytes (file size " + std::to_string(file_size) + ", header " +
                        std::to_string(h.header_size) + " bytes)");
    return true;
}

}  // namespace ringsafe::format

// ggml's checks of a GGUF header (gguf.cpp's gguf_init_from_file), each with its kind.
#include "format/gguf/checks.hpp"

#include <cctype>
#include <limits>

#include "format/alignment.hpp"

namespace ringsafe::format::gguf {
namespace {

using ringsafe::gguf::value_type;

// ggml's count limits: SIZE_MAX / sizeof(gguf_tensor_info) and / sizeof(gguf_kv)
// on 64-bit hosts (the corpus's README gives these numbers).
constexpr std::int64_t max_tensors = 53624256028225440;
constexpr std::int64_t max_kv = 209622091746699450;
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

std::string tensor_label(const std::string& name) { return "tensor '" + name + "'"; }

std::string shape_text(const std::int64_t ne[4]) {
    std::string s = "(";
    for (int i = 0; i < 4; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + ")";
}

}  // namespace

void check_magic(const char* first4) {
    if (std::string_view(first4, 4) == ringsafe::gguf::magic) return;
    std::string shown, hex;
    static constexpr char digits[] = "0123456789abcdef";
    for (int i = 0; i < 4; ++i) {
        const auto c = static_cast<unsigned char>(first4[i]);
        shown += std::isprint(c) ? static_cast<char>(c) : '?';
        if (i) hex += ' ';
        hex += digits[c >> 4];
        hex += digits[c & 15];
    }
    raise(errc::BadMagic, "not a GGUF file: its first 4 bytes are '" + shown + "' (" + hex + "), expected 'GGUF'");
}

void check_version(std::uint32_t v) {
    if (v == 0) raise(errc::BadVersion, "bad GGUF version 0 (at offset 4)");
    if ((v & 0xffffu) == 0)
        raise(errc::BadEndian, "GGUF version " + std::to_string(v) +
                                   " is extremely large: the file was written on a host of the other byte order "
                                   "(ringsafe, like ggml, reads little-endian GGUF files only)");
    if (v == 1) raise(errc::BadVersion, "GGUF version 1 is no longer supported (versions 2 and 3 are)");
    if (v > ringsafe::gguf::max_version)
        raise(errc::BadVersion, "this GGUF file is version " + std::to_string(v) + ", but versions up to " +
                                    std::to_string(ringsafe::gguf::max_version) + " are supported");
}

void check_counts_tensors(std::int64_t n) {
    if (n < 0 || n > max_tensors)
        raise(errc::BadCount, "the number of tensors is " + std::to_string(n) + " but must be in [0, " +
                                  std::to_string(max_tensors) + "] (at offset 8)");
}

void check_counts_kv(std::int64_t n) {
    if (n < 0 || n > max_kv)
        raise(errc::BadCount, "the number of key-value pairs is " + std::to_string(n) + " but must be in [0, " +
                                  std::to_string(max_kv) + "] (at offset 16)");
}

void check_value_type(std::uint32_t id, const std::string& key, bool element) {
    if (id < ringsafe::gguf::value_type_count && !(element && id == static_cast<std::uint32_t>(value_type::ARRAY)))
        return;
    raise(errc::BadKV, "key '" + key + "' has invalid GGUF type " + std::to_string(static_cast<std::int32_t>(id)) +
                           (element ? " as an array's element type (nested arrays are not supported)" : ""));
}

std::uint32_t alignment_of(const ringsafe::gguf::metadata_entry* e) {
    if (!e) return ringsafe::gguf::default_alignment;
    if (e->type != value_type::UINT32)
        raise(errc::BadAlignment, "key 'general.alignment' must be of type UINT32 but is " +
                                      std::string(ringsafe::gguf::value_type_name(e->type)) +
                                      (e->is_array() ? " of " + std::string(value_type_name(e->element_type)) : ""));
    const auto a = static_cast<std::uint32_t>(std::get<std::uint64_t>(e->value()));
    if (a == 0 || (a & (a - 1)) != 0)
        raise(errc::BadAlignment, "general.alignment " + std::to_string(a) + " is not a power of 2");
    return a;
}

void check_n_dims(const std::string& name, std::uint32_t n_dims) {
    if (n_dims > ringsafe::gguf::max_dims)
        raise(errc::BadTensorInfo, tensor_label(name) + " has invalid number of dimensions: " +
                                       std::to_string(n_dims) + " > " + std::to_string(ringsafe::gguf::max_dims));
}

void check_ne(const std::string& name, std::uint32_t j, std::int64_t ne) {
    if (ne < 0)
        raise(errc::BadTensorInfo, tensor_label(name) + " dimension " + std::to_string(j) +
                                       " has invalid number of elements: " + std::to_string(ne) + " < 0");
}

void check_elements(const std::string& name, const std::int64_t ne[4]) {
    // ggml's own test, term by term; each product is formed only once the
    // term before has shown it fits (a zero dimension makes the rest zero,
    // where ggml would divide by it).
    bool over = ne[1] && int64_max / ne[1] <= ne[0];
    if (!over) {
        const std::int64_t p01 = ne[0] * ne[1];
        over = ne[2] && int64_max / ne[2] <= p01;
        if (!over) over = ne[3] && int64_max / ne[3] <= p01 * ne[2];
    }
    if (over)
        raise(errc::BadTensorInfo, "the shape " + shape_text(ne) + " of " + tensor_label(name) +
                                       " has INT64_MAX elements or more: it may cause overflow errors");
}

std::uint64_t check_type(const std::string& name, std::int32_t type, const std::int64_t ne[4]) {
    if (type < 0 || static_cast<std::uint32_t>(type) >= ggml_type_count)
        raise(errc::BadTensorInfo, tensor_label(name) + " has invalid ggml type " + std::to_string(type) +
                                       ": should be in [0, " + std::to_string(ggml_type_count) + ")");
    const ggml_type_traits tr = ggml_traits(static_cast<std::uint32_t>(type));
    if (tr.block_size == 0)
        raise(errc::BadTensorInfo, tensor_label(name) + " has ggml type " + std::to_string(type) +
                                       ", which ggml removed");
    if (ne[0] % tr.block_size != 0)
        raise(errc::BadTensorInfo, tensor_label(name) + " of type " + std::string(tr.name) + " (" +
                                       std::to_string(type) + ") has " + std::to_string(ne[0]) +
                                       " elements per row, not a multiple of its block size " +
                                       std::to_string(tr.block_size));
    std::uint64_t bytes = static_cast<std::uint64_t>(ne[0]) / tr.block_size;
    for (int j = 0; j < 4; ++j)
        if (__builtin_mul_overflow(bytes, j ? static_cast<std::uint64_t>(ne[j]) : tr.type_size, &bytes))
            raise(errc::BadTensorInfo, tensor_label(name) + " of shape " + shape_text(ne) + " and type " +
                                           std::string(tr.name) + " has a size in bytes above 2^64");
    return bytes;
}

void place_tensors(ringsafe::gguf::header& h, const std::vector<std::uint64_t>& sizes, std::uint64_t file_size) {
    const std::uint64_t a = h.alignment;
    if (h.tensors.empty()) {
        h.data_offset = h.info_end;
    } else {
        if (h.info_end > std::numeric_limits<std::uint64_t>::max() - (a - 1) || align_up(h.info_end, a) > file_size)
            raise(errc::Truncated, "the file (" + std::to_string(file_size) +
                                       " bytes) ends inside the padding before the data section (the tensor "
                                       "infos end at offset " + std::to_string(h.info_end) + ", alignment " +
                                       std::to_string(a) + ")");
        h.data_offset = align_up(h.info_end, a);
    }
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
        tensor_info& t = h.tensors[i];
        if (t.begin != sum)
            raise(errc::BadOffset, tensor_label(t.name) + " has offset " + std::to_string(t.begin) + ", expected " +
                                       std::to_string(sum) + " (tensors lie in tensor-info order, each padded to " +
                                       std::to_string(a) + " bytes)");
        std::uint64_t padded = 0;
        if (sizes[i] > std::numeric_limits<std::uint64_t>::max() - (a - 1) ||
            __builtin_add_overflow(sum, align_up(sizes[i], a), &padded))
            raise(errc::BadOffset, tensor_label(t.name) + " at offset " + std::to_string(sum) + " with " +
                                       std::to_string(sizes[i]) + " bytes takes the data section past 2^64 bytes");
        t.end = t.begin + sizes[i];
        sum = padded;
    }
    h.data_size = sum;
    if (sum > file_size - h.data_offset)
        raise(errc::DataPastEnd, "the data section (" + std::to_string(sum) + " bytes at offset " +
                                     std::to_string(h.data_offset) + ", every tensor padded to " + std::to_string(a) +
                                     " bytes) runs past the end of the file (" + std::to_string(file_size) +
                                     " bytes)");
}

}  // namespace ringsafe::format::gguf

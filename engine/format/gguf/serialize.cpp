// gguf::serialize: a header's exact bytes, each part checked as the reader checks it.
#include <algorithm>
#include <unordered_set>

#include "format/alignment.hpp"
#include "format/gguf/bytes.hpp"
#include "format/gguf/checks.hpp"
#include "ringsafe/gguf.hpp"

namespace ringsafe::gguf {
namespace {

namespace fg = ringsafe::format::gguf;

[[noreturn]] void bad(const std::string& why) { raise(errc::InvalidArgument, "gguf::serialize: " + why); }

// Bytes of an entry's value as stored after its type (and an array's element type and count).
std::uint64_t value_bytes(const metadata_entry& e) {
    if (e.element_type == value_type::STRING) return 8 * e.count + e.data.size();
    return e.data.size();
}

void check_entry(const metadata_entry& e) {
    if (e.key.empty()) raise(errc::BadKV, "a metadata entry has an empty key");
    fg::check_value_type(static_cast<std::uint32_t>(e.type), e.key, false);
    if (e.is_array()) {
        fg::check_value_type(static_cast<std::uint32_t>(e.element_type), e.key, true);
        if (e.count > max_array_elements)
            raise(errc::BadArray, "array '" + e.key + "' has " + std::to_string(e.count) + " elements, more than " +
                                      std::to_string(max_array_elements));
    } else if (e.element_type != e.type || e.count != 1) {
        bad("key '" + e.key + "' is a scalar but says element type " +
            std::to_string(static_cast<std::uint32_t>(e.element_type)) + " and count " + std::to_string(e.count));
    }
    if (e.element_type == value_type::STRING) {
        const auto& o = e.offsets;
        if (o.size() != e.count + 1 || o.front() != 0 || o.back() != e.data.size() || !std::is_sorted(o.begin(), o.end()))
            bad("key '" + e.key + "': its string offsets do not cover its " + std::to_string(e.data.size()) +
                " bytes in " + std::to_string(e.count) + " strings");
        for (std::size_t i = 0; i + 1 < o.size(); ++i)
            if (o[i + 1] - o[i] > max_string_length)
                raise(errc::BadString, "string " + std::to_string(i) + " of key '" + e.key + "' is longer than " +
                                           std::to_string(max_string_length) + " bytes");
    } else if (e.data.size() != e.count * value_type_size(e.element_type)) {
        bad("key '" + e.key + "' holds " + std::to_string(e.data.size()) + " bytes for " + std::to_string(e.count) +
            " elements of " + std::string(value_type_name(e.element_type)));
    }
}

// A record's ne padded to 4, and its size in bytes, as the reader checks them.
std::uint64_t check_record(const tensor_record& t) {
    if (t.name.size() > max_name_length)
        raise(errc::BadTensorInfo, "tensor name '" + t.name + "' is too long: " + std::to_string(t.name.size()) +
                                       " >= " + std::to_string(max_name_length + 1) + " bytes");
    fg::check_n_dims(t.name, static_cast<std::uint32_t>(std::min<std::size_t>(t.ne.size(), 1u << 31)));
    std::int64_t ne[4] = {1, 1, 1, 1};
    for (std::size_t j = 0; j < t.ne.size(); ++j) {
        ne[j] = static_cast<std::int64_t>(t.ne[j]);
        fg::check_ne(t.name, static_cast<std::uint32_t>(j), ne[j]);
    }
    fg::check_elements(t.name, ne);
    return fg::check_type(t.name, static_cast<std::int32_t>(t.type), ne);
}

void check_alignment(std::span<const metadata_entry> metadata, std::uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
        raise(errc::BadAlignment, "alignment " + std::to_string(alignment) + " is not a power of 2");
    for (const metadata_entry& e : metadata)
        if (e.key == "general.alignment" && fg::alignment_of(&e) != alignment)
            bad("general.alignment says " + std::to_string(fg::alignment_of(&e)) + " but the alignment is " +
                std::to_string(alignment));
}

// Checks everything; returns each tensor's size.
std::vector<std::uint64_t> check_all(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors,
                                     std::uint32_t alignment) {
    check_alignment(metadata, alignment);
    std::unordered_set<std::string_view> keys, names;
    for (const metadata_entry& e : metadata) {
        check_entry(e);
        if (!keys.insert(e.key).second) raise(errc::DuplicateKey, "duplicate key '" + e.key + "'");
    }
    std::vector<std::uint64_t> sizes;
    sizes.reserve(tensors.size());
    for (const tensor_record& t : tensors) {
        sizes.push_back(check_record(t));
        if (!names.insert(std::string_view(t.name.c_str())).second)
            raise(errc::DuplicateTensor, "duplicate tensor name '" + t.name + "'");
    }
    return sizes;
}

std::uint64_t infos_end(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors) {
    std::uint64_t n = 4 + 4 + 8 + 8;
    for (const metadata_entry& e : metadata) n += 8 + e.key.size() + 4 + (e.is_array() ? 12 : 0) + value_bytes(e);
    for (const tensor_record& t : tensors) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
    return n;
}

void append_string(std::string& out, std::string_view s) {
    fg::append_le(out, s.size(), 8);
    out.append(s);
}

}  // namespace

std::uint64_t serialized_size(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors,
                              std::uint32_t alignment) {
    check_all(metadata, tensors, alignment);
    return format::align_up<std::uint64_t>(infos_end(metadata, tensors), alignment);
}

std::string serialize(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors,
                      std::uint32_t alignment, std::uint32_t version) {
    if (version < 2 || version > max_version)
        raise(errc::BadVersion, "gguf::serialize: version " + std::to_string(version) + " (2 and 3 are written)");
    const std::vector<std::uint64_t> sizes = check_all(metadata, tensors, alignment);
    const std::uint64_t end = infos_end(metadata, tensors);
    std::string out;
    out.reserve(format::align_up<std::uint64_t>(end, alignment));
    out.append(magic);
    fg::append_le(out, version, 4);
    fg::append_le(out, tensors.size(), 8);
    fg::append_le(out, metadata.size(), 8);
    for (const metadata_entry& e : metadata) {
        append_string(out, e.key);
        fg::append_le(out, static_cast<std::uint32_t>(e.type), 4);
        if (e.is_array()) {
            fg::append_le(out, static_cast<std::uint32_t>(e.element_type), 4);
            fg::append_le(out, e.count, 8);
        }
        if (e.element_type != value_type::STRING) {
            out.append(e.data);
            continue;
        }
        for (std::uint64_t i = 0; i < e.count; ++i)
            append_string(out, std::string_view(e.data).substr(e.offsets[i], e.offsets[i + 1] - e.offsets[i]));
    }
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const tensor_record& t = tensors[i];
        append_string(out, t.name);
        fg::append_le(out, t.ne.size(), 4);
        for (std::uint64_t d : t.ne) fg::append_le(out, d, 8);
        fg::append_le(out, static_cast<std::uint32_t>(t.type), 4);
        fg::append_le(out, offset, 8);
        offset += format::align_up<std::uint64_t>(sizes[i], alignment);
    }
    out.resize(format::align_up<std::uint64_t>(out.size(), alignment), '\0');
    return out;
}

std::vector<tensor_record> records_of(const header& h) {
    std::vector<tensor_record> out;
    out.reserve(h.tensors.size());
    for (const tensor_info& t : h.tensors) out.push_back({t.name, t.ggml, ne_of(t)});
    return out;
}

}  // namespace ringsafe::gguf

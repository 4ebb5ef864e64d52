// Checks and entries shared by the GGUF writers (gguf_entries.hpp).
#include "write/gguf_entries.hpp"

#include <algorithm>

#include "write/tensor_check.hpp"

namespace ringsafe {

namespace gguf {

std::uint64_t tensor_bytes(const tensor_record& t) {
    // The serializer checks a record as ggml's reader does (name, dims, ne, type, rows of whole blocks).
    serialized_size({}, std::span<const tensor_record>(&t, 1), default_alignment);
    std::uint64_t elements = 1;
    for (std::uint64_t d : t.ne) elements *= d;  // checked above: no overflow
    auto n = ggml_bytes_for(t.type, elements);
    if (!n)
        raise(errc::BadTensorInfo, write::describe_tensor(t.name) + " of type " +
                                       std::string(ggml_type_name(t.type)) + " has no whole number of blocks");
    return *n;
}

}  // namespace gguf

namespace write {

std::vector<gguf::metadata_entry> stored_metadata(std::vector<gguf::metadata_entry> metadata, std::uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
        raise(errc::InvalidArgument, "GGUF alignment " + std::to_string(alignment) + " is not a power of 2");
    std::erase_if(metadata, [](const gguf::metadata_entry& e) { return e.key == gguf::padding_key; });
    const bool has = std::any_of(metadata.begin(), metadata.end(),
                                 [](const gguf::metadata_entry& e) { return e.key == "general.alignment"; });
    if (!has && alignment != gguf::default_alignment)
        metadata.push_back(gguf::metadata_entry::make("general.alignment", gguf::value_type::UINT32,
                                                      std::uint64_t{alignment}));
    gguf::serialized_size(metadata, {}, alignment);  // every entry checked as the serializer checks it
    return metadata;
}

std::uint64_t unpadded_size(std::span<const gguf::metadata_entry> metadata, std::span<const gguf::tensor_record> tensors,
                            std::uint32_t alignment) {
    gguf::serialized_size(metadata, tensors, alignment);  // the serializer's checks
    std::uint64_t n = 4 + 4 + 8 + 8;                       // magic, version, the two counts
    for (const gguf::metadata_entry& e : metadata) {
        n += 8 + e.key.size() + 4 + (e.is_array() ? 4 + 8 : 0);
        n += e.data.size() + (e.element_type == gguf::value_type::STRING ? 8 * e.count : 0);
    }
    for (const gguf::tensor_record& t : tensors) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
    return n;
}

gguf::metadata_entry padding_entry(std::uint64_t spaces) {
    gguf::metadata_entry e;
    e.key = std::string(gguf::padding_key);
    e.type = e.element_type = gguf::value_type::STRING;
    e.data.assign(spaces, ' ');
    e.offsets = {0, spaces};
    return e;
}

}  // namespace write
}  // namespace ringsafe

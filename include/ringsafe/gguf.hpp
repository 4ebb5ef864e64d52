// The GGUF header (llama.cpp's and ggml's file format): parsing with ggml's
// checks, incremental parsing over a growing prefix, and serialization.
//
// Layout of a file (little-endian): "GGUF", version (u32), tensor count (i64),
// metadata count (i64), the metadata entries (key string, value type, value),
// the tensor infos (name, n_dims, ne[n_dims], ggml type, offset), padding to
// `alignment`, then the data section. A tensor's offset is relative to the
// data section; tensors lie in tensor-info order, each padded to `alignment`.
// A string is a u64 length and that many bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::gguf {

// ggml's limits (gguf.cpp, ggml.h).
inline constexpr std::uint32_t max_version = 3;              // versions 2 and 3 are read
inline constexpr std::uint32_t default_alignment = 32;       // without general.alignment
inline constexpr std::uint64_t max_string_length = 1ull << 30;
inline constexpr std::uint64_t max_array_elements = 1ull << 30;
inline constexpr std::size_t max_name_length = 63;           // GGML_MAX_NAME 64 holds 63 and the NUL
inline constexpr std::uint32_t max_dims = 4;

// The file's magic, and whether `prefix` (a source's first bytes) starts with
// it: the format is told by these bytes, never by a file's name.
inline constexpr std::string_view magic = "GGUF";
bool is_gguf(std::span<const std::byte> prefix) noexcept;

// Metadata value types, ids as stored in a file (gguf.h's gguf_type).
enum class value_type : std::uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
inline constexpr std::uint32_t value_type_count = 13;

// The name as gguf-py's GGUFValueType spells it ("UINT32", "STRING"); "" for an id out of range.
std::string_view value_type_name(value_type t) noexcept;
// Parses such a name; nullopt for any other text.
std::optional<value_type> value_type_from_name(std::string_view name) noexcept;
// Bytes of one element of a fixed-size type; 0 for STRING, ARRAY and ids out of range.
std::uint32_t value_type_size(value_type t) noexcept;

// One element of a value: unsigned integers (UINT8..UINT64) as uint64, signed
// ones as int64, FLOAT32/FLOAT64 as the exact value widened to double, BOOL
// (any nonzero byte is true, as ggml reads it), STRING as its bytes.
using scalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string_view>;

// One metadata entry (key-value pair) as the file stores it.
struct metadata_entry {
    std::string key;
    value_type type = value_type::UINT8;          // ARRAY for an array
    value_type element_type = value_type::UINT8;  // an array's element type; a scalar's own type
    std::uint64_t count = 1;                      // an array's element count; 1 for a scalar
    // The value's bytes as stored: fixed-size elements as they are (count x
    // size, little-endian); strings without their length prefixes, one after
    // the other, every byte kept (a NUL too: ggml's C API would end a string there).
    std::string data;
    // Strings only: element i is data[offsets[i], offsets[i + 1]) (count + 1 entries).
    std::vector<std::uint64_t> offsets;

    bool is_array() const noexcept { return type == value_type::ARRAY; }
    // Element i (0 for a scalar). InvalidArgument when i >= count.
    scalar value(std::uint64_t i = 0) const;
    // Element i of a STRING value. InvalidArgument for another type or i >= count.
    std::string_view string_at(std::uint64_t i = 0) const;
    // A scalar of an integer type whose value fits in int64; nullopt otherwise
    // (other types, arrays, UINT64 above INT64_MAX).
    std::optional<std::int64_t> as_integer() const noexcept;
    // A scalar STRING's bytes; nullopt otherwise.
    std::optional<std::string_view> as_string() const noexcept;

    // Makes a scalar entry of type `t` (not ARRAY). InvalidArgument when `v`'s
    // kind does not fit `t` (an integer out of its range, a string for UINT32, ...).
    static metadata_entry make(std::string key, value_type t, const scalar& v);
    // Makes an array of `element` (not ARRAY) from `values`, each fitting `element`.
    static metadata_entry make_array(std::string key, value_type element, std::span<const scalar> values);
};

// The split keys of llama.cpp's gguf-split, which every part of a split model carries.
struct split_info {
    std::uint64_t no = 0;             // split.no: this part's 0-based index
    std::uint64_t count = 0;          // split.count: parts in the set
    std::uint64_t tensors_count = 0;  // split.tensors.count: tensors over all parts
};

// A parsed and checked GGUF header.
struct header {
    std::uint32_t version = max_version;
    std::uint32_t alignment = default_alignment;
    // Absolute offset of the data section: the end of the tensor infos rounded
    // up to `alignment`; with no tensors, the end of the metadata, unpadded (as ggml).
    std::uint64_t data_offset = 0;
    // Bytes the data section holds: every tensor's size padded to alignment,
    // the last one included (what the file must hold past data_offset).
    std::uint64_t data_size = 0;
    std::uint64_t info_end = 0;  // where the tensor infos end (the header bytes parsed)
    std::vector<metadata_entry> metadata;  // file order
    // Tensor-info order, which is data order. shape is ggml's ne reversed
    // (PyTorch order; [] for n_dims 0), begin/end relative to data_offset
    // (end unpadded), ggml the type, dtype its plain dtype or U8 for block types.
    std::vector<tensor_info> tensors;
    std::vector<std::uint32_t> by_name;  // tensor indices sorted by name
    std::vector<std::uint32_t> by_key;   // metadata indices sorted by key

    // Lookup by exact name / key (binary search); nullptr when absent.
    const tensor_info* find(std::string_view name) const noexcept;
    const metadata_entry* find_key(std::string_view key) const noexcept;
    // The split keys: nullopt without split.count; InvalidIndex naming the key
    // when split.count is there but a split key is missing, not an integer, or negative.
    std::optional<split_info> split() const;
    // Rebuilds by_name and by_key (after editing tensors or metadata by hand).
    void build_indexes();
};

// ggml's ne of a tensor_info: its shape reversed (fastest-varying first).
std::vector<std::uint64_t> ne_of(const tensor_info& t);

// Where an incremental parse stands.
struct progress {
    bool done = false;
    // When !done: the least absolute end offset of the prefix that lets the
    // parse go further, and an estimate of where the header ends, from what
    // it has seen (counts x the average size of the elements read so far;
    // fixed-size arrays exactly). need <= estimate <= the file's size.
    std::uint64_t need = 0;
    std::uint64_t estimate = 0;
};

// Parses a header from a prefix that grows: call feed() with the file's bytes
// from offset 0 (each call at least as many as the last, the same bytes),
// until it says done, then finish(). Every check of ggml's reader, in its
// order, each failing with its errc kind (BadMagic, ..., BadOffset) and a
// message naming the key, tensor or offset; a field that ends past the file's
// end is Truncated, a string or array longer than what is left BadString /
// BadArray, and a header ending past parse_options::max_header_size bytes is
// HeaderTooLarge. The data section running past `file_size` is DataPastEnd.
// Memory grows with the bytes parsed, never with the counts the file claims.
class parser {
public:
    parser(std::uint64_t file_size, const parse_options& opts = {});
    ~parser();
    parser(parser&&) noexcept;
    parser& operator=(parser&&) noexcept;

    // Parses what `prefix` adds. Throws ringsafe::error (the parser is then
    // spent); InvalidArgument when the prefix is shorter than the last one.
    progress feed(std::span<const std::byte> prefix);
    // Once feed() said done: the header. Call it once.
    header finish();

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

// Parses a whole in-memory file (or at least its header: a prefix that holds
// the tensor infos, with `file_size` the whole file's size; 0 = prefix.size()).
// Throws what parser throws; InvalidArgument when the prefix ends too early.
header parse(std::span<const std::byte> prefix, std::uint64_t file_size = 0, const parse_options& opts = {});
// Non-throwing form: nullopt and `st` filled on failure (cleared on success).
std::optional<header> parse(std::span<const std::byte> prefix, std::uint64_t file_size, const parse_options& opts,
                            status& st) noexcept;

// What the serializer writes for one tensor (the offsets follow from the order).
struct tensor_record {
    std::string name;
    ggml_type type = ggml_type::F32;
    std::vector<std::uint64_t> ne;  // ggml order: fastest-varying first
};

// A header's exact bytes: magic, `version` (2 or 3), the counts, the entries
// in order, the tensor infos with each offset the running sum of the previous
// sizes padded to `alignment` (a power of two; general.alignment, if among the
// entries, must say the same), then zeros up to the next multiple of
// `alignment`, where the data section starts (ggml's reader reports an
// unpadded data_offset for a file with no tensors; the padding is written as
// ggml's and gguf-py's writers write it). Whatever ggml's reader would refuse
// is refused with the kind it would report (BadKV, BadTensorInfo, ...);
// entries whose bytes do not match their type and count are InvalidArgument.
std::string serialize(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors,
                      std::uint32_t alignment = default_alignment, std::uint32_t version = max_version);
// The size serialize() would return (the data section's offset), without making it.
std::uint64_t serialized_size(std::span<const metadata_entry> metadata, std::span<const tensor_record> tensors,
                              std::uint32_t alignment = default_alignment);
// A parsed header's records and entries, to serialize it again.
std::vector<tensor_record> records_of(const header& h);

}  // namespace ringsafe::gguf

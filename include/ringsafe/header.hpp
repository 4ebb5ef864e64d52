// The safetensors header: parsing with validation, and serialization.
//
// Layout of a file: 8-byte little-endian N, N bytes of JSON (padded with
// spaces), then the data section. Offsets in tensor_info are relative to the
// first byte of the data section; the absolute file offset is
// header::data_start() + begin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/dims.hpp"
#include "ringsafe/dtype.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/ggml_type.hpp"

namespace ringsafe {

// The reference's default cap on N, the header's length in bytes.
inline constexpr std::uint64_t default_max_header_size = 100'000'000;

// One tensor as described in the header (of a safetensors or a GGUF file).
struct tensor_info {
    std::string name;                  // after JSON unescaping, UTF-8
    ringsafe::dtype dtype{};           // element type (U8 for a GGUF block type: see `ggml`)
    ringsafe::dims shape;              // [] is a scalar (one element); reads like a std::vector
    std::uint64_t begin = 0;           // data_offsets[0], relative to the data section
    std::uint64_t end = 0;             // data_offsets[1]
    // A GGUF tensor's ggml type (plain ones too); ggml_type::none in a safetensors
    // file. For a block type (ggml_is_quantized) `shape` counts elements, as for
    // any tensor, while the bytes are blocks: `dtype` is U8 and describes no element.
    ringsafe::ggml_type ggml = ggml_type::none;

    std::uint64_t size() const noexcept { return end - begin; }  // bytes
    // Product of the dimensions (1 for a scalar). Only meaningful for validated infos.
    std::uint64_t elements() const noexcept;
    // True for a GGUF block type: whole-tensor reads only (no rows, boxes or dtype views).
    bool quantized() const noexcept { return ggml != ggml_type::none && ggml_is_quantized(ggml); }
};

// `__metadata__`: string keys to string values, kept sorted by key.
using metadata_map = std::map<std::string, std::string>;

// Options for parsing a header.
struct parse_options {
    // Cap on a header's bytes, HeaderTooLarge above it: safetensors' length N;
    // GGUF's bytes from offset 0 to the end of the tensor infos.
    std::uint64_t max_header_size = default_max_header_size;
};

// A parsed and validated header.
struct header {
    // Every tensor in data order: by begin, then end, ties broken by byte-wise name.
    std::vector<tensor_info> tensors;
    // nullopt when the header has no `__metadata__` (or it is JSON null); `{}` stays distinct.
    std::optional<metadata_map> metadata;
    std::uint64_t header_size = 0;  // N, padding included
    std::uint64_t data_size = 0;    // bytes of the data section (= end of the last tensor)

    std::uint64_t data_start() const noexcept { return 8 + header_size; }  // file offset of data
    std::uint64_t file_size() const noexcept { return 8 + header_size + data_size; }

    // Finds a tensor by exact name (binary search over a name index); nullptr if absent.
    const tensor_info* find(std::string_view name) const noexcept;
    // Like find() but throws ringsafe::error(TensorNotFound) naming the tensor.
    const tensor_info& at(std::string_view name) const;

    // Indices into `tensors` sorted by byte-wise name; built by the parser
    // (call build_name_index() after editing `tensors` by hand).
    std::vector<std::uint32_t> by_name;
    void build_name_index();
};

// Reads the 8-byte little-endian length prefix from `prefix` (at least 8 bytes
// unless the file is shorter) and checks it against `file_size` in the
// reference's order: HeaderTooSmall, HeaderTooLarge, InvalidHeaderLength
// (8 + N overflowing counts as past the end). Returns N. A prefix span shorter
// than 8 bytes for a file of 8 or more bytes is InvalidArgument.
std::uint64_t parse_length_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                                  const parse_options& opts = {});

// Parses and validates the N header bytes (`json`, exactly N bytes, padding
// included) of a file of `file_size` bytes. Checks, in the reference's order:
// N against the limit and the file size (HeaderTooLarge, InvalidHeaderLength),
// UTF-8 of all N bytes (InvalidHeader), JSON shape (InvalidHeaderDeserialization,
// message with the byte position), duplicate names (DuplicateTensorName), then
// per tensor in data order InvalidOffset, ValidationOverflow, MisalignedSlice,
// TensorInvalidInfo, and finally that the data section is exactly covered
// (MetadataIncompleteBuffer). `json` is only read during the call; the result
// owns copies. Memory grows with N, never with the sizes the header claims.
// Throws ringsafe::error; the non-throwing overload returns nullopt and fills
// `st` (clearing it on success; ENOMEM as a system error).
header parse_header(std::string_view json, std::uint64_t file_size, const parse_options& opts = {});
std::optional<header> parse_header(std::string_view json, std::uint64_t file_size,
                                   const parse_options& opts, status& st) noexcept;

// Parses the N header bytes fed in pieces, in file order, so that a huge
// header never has to be held whole: the same checks, errors and result as
// parse_header(). A JSON error is reported only once every byte's UTF-8 has
// been checked (the reference checks UTF-8 first), so a caller keeps feeding
// until feed() returns false or all N bytes are in. When the value that fails
// straddles two pieces, the error's byte position is that of the second piece.
class header_parser {
public:
    // Checks N against the limit and the file size (HeaderTooLarge, InvalidHeaderLength; throws).
    header_parser(std::uint64_t n, std::uint64_t file_size, const parse_options& opts = {});
    ~header_parser();
    header_parser(header_parser&&) noexcept;
    header_parser& operator=(header_parser&&) noexcept;

    // Takes the next bytes (at most N in all). False once the outcome is
    // known to be an error whatever follows: stop feeding and call finish().
    bool feed(std::string_view bytes);
    // After N bytes (or a false feed()): the validated header, or throws
    // ringsafe::error as parse_header() does. Call it once.
    header finish();
    // Non-throwing finish(): nullopt and `st` filled on failure (ENOMEM as a system error).
    std::optional<header> finish(status& st) noexcept;

private:
    struct impl;
    std::unique_ptr<impl> p_;
};

// Parses a whole in-memory file (prefix + header + data); the data is not read.
header parse_file(std::span<const std::byte> file, const parse_options& opts = {});

// What the serializer needs to know about one tensor.
struct tensor_entry {
    std::string name;
    ringsafe::dtype dtype{};
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

// Options for serializing a header.
struct serialize_options {
    // Pad the JSON with spaces to this exact size (0 = to the next multiple of 8).
    // Throws ReservationExceeded when the JSON does not fit.
    std::uint64_t pad_to = 0;
};

// Serializes a header the way the reference writer does: compact JSON,
// `__metadata__` first when present, tensors in the given order, each as
// dtype, shape, data_offsets, padded with spaces. Strings are escaped like
// serde_json (\" \\ and control characters; non-ASCII stays raw UTF-8).
// Returns the N header bytes (without the 8-byte prefix). Entries are not
// validated here.
std::string serialize_header(std::span<const tensor_entry> tensors,
                             const metadata_map* metadata,
                             const serialize_options& opts = {});

// Length of the compact JSON serialize_header() would produce, before padding
// (lets a writer reserve header space before the data is known).
std::uint64_t serialized_json_size(std::span<const tensor_entry> tensors,
                                   const metadata_map* metadata);

// Encodes N as the 8-byte little-endian prefix.
void encode_length_prefix(std::uint64_t n, std::byte out[8]) noexcept;

// The reference writer's tensor order: dtype in descending enum order, then byte-wise name.
bool reference_writer_order(const tensor_entry& a, const tensor_entry& b) noexcept;

}  // namespace ringsafe

// ringsafe's one error model.
//
// Every failure is a std::error_code plus a message naming the tensor, offset,
// path or URL involved. Format errors use the ringsafe::errc category, whose
// enumerator names match the reference implementation's error kinds; operating
// system failures use std::system_category() with the errno value.
//
// Each operation comes in two styles (as in fmt): a throwing one that raises
// ringsafe::error, and a non-throwing one that fills a ringsafe::status.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace ringsafe {

// Error kinds. The first block mirrors the reference's SafeTensorError kinds;
// the rest are ringsafe's own for what the reference does not cover.
enum class errc : int {
    // --- reference kinds ---
    HeaderTooSmall = 1,            // file shorter than the 8-byte length prefix
    HeaderTooLarge,                // length prefix N above the header size limit
    InvalidHeaderLength,           // 8 + N beyond the end of the file
    InvalidHeader,                 // header bytes are not valid UTF-8
    InvalidHeaderDeserialization,  // header is not a JSON object of the expected shape
    InvalidOffset,                 // offsets not contiguous from 0, or end < begin
    ValidationOverflow,            // element count or bit size does not fit in 64 bits
    MisalignedSlice,               // bit size not a multiple of 8
    TensorInvalidInfo,             // end - begin differs from shape x dtype
    MetadataIncompleteBuffer,      // data section not exactly covered by the tensors
    // --- ringsafe's own ---
    DuplicateTensorName,  // a tensor name appears twice (the reference keeps the last)
    TensorNotFound,       // a requested tensor name is not in the checkpoint
    InvalidArgument,      // a caller argument is invalid (bad slice, bad option, ...)
    BufferTooSmall,       // a caller-supplied destination is smaller than needed
    InvalidIndex,         // a sharded index (model.safetensors.index.json) is malformed or inconsistent
    Truncated,            // the source ended before the requested bytes (file shrank after open)
    Cancelled,            // the operation was cancelled by the caller
    IoError,              // an I/O failure without an errno (e.g. a short read that made no progress)
    HttpError,            // an HTTP request failed (status, protocol, too many retries)
    RangeNotSupported,    // the server ignored or mangled a Range request
    ObjectChanged,        // the remote object changed while it was being read (ETag / size)
    ReservationExceeded,  // writer: the header outgrew its reservation in strict mode
    WriterState,          // writer: a call out of order (add after finish, append without begin, ...)
    // --- GGUF: the kinds of ggml's reader (gguf.cpp), named as ../shared/conformance-gguf names them ---
    BadMagic,         // the first 4 bytes are not "GGUF"
    BadVersion,       // version 0, 1 or above 3
    BadEndian,        // the version's low 16 bits are zero: a file of the other byte order
    BadCount,         // tensor or key-value count negative or too large
    BadString,        // a string longer than 2^30 bytes or than what is left of the file
    BadArray,         // an array of more than 2^30 elements, or larger than what is left
    BadKV,            // an empty key, a value type out of range, a nested array
    DuplicateKey,     // a metadata key seen twice
    BadAlignment,     // general.alignment not a UINT32 power of two
    BadTensorInfo,    // a tensor info's name, dimensions, type, block multiple or size is invalid
    DuplicateTensor,  // a tensor name seen twice in one GGUF file
    BadOffset,        // a tensor's offset differs from the running padded sum
    DataPastEnd,      // the data section (every tensor padded) runs past the end of the file
};

// The category of ringsafe::errc; its name() is "ringsafe".
const std::error_category& category() noexcept;

// Makes an error_code of the ringsafe category.
std::error_code make_error_code(errc e) noexcept;

// The kind's name as the reference spells it ("HeaderTooSmall", ...). For a
// system_category code it returns "IoError"; for any other category, "Error".
std::string_view error_kind(const std::error_code& ec) noexcept;

// `text` with the value of every URL query parameter that signs or authorizes
// a request (Signature, X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token,
// X-Goog-Signature, X-Goog-Credential, sig, Policy, Key-Pair-Id, token; any case)
// written "...": a presigned or SAS URL is a credential. Every error message passes through it.
std::string without_url_secrets(std::string text);

// The exception thrown by the throwing overloads: code() is the kind, what()
// the full message (which names the tensor/offset/path/URL, without the
// secrets of a URL: without_url_secrets), and path() the file system path the
// failure is about, where there is one.
class error : public std::system_error {
public:
    error(std::error_code ec, std::string message)
        : std::system_error(ec), message_(without_url_secrets(std::move(message))) {}
    error(errc e, std::string message) : error(make_error_code(e), std::move(message)) {}
    // An error about one file system path (which the message names too).
    error(std::error_code ec, std::string message, std::string path)
        : std::system_error(ec), message_(without_url_secrets(std::move(message))), path_(std::move(path)) {}
    // The message alone (std::system_error would append the category's text).
    const char* what() const noexcept override { return message_.c_str(); }
    // The same message whole: what() ends at a NUL that a tensor name may hold.
    const std::string& message() const noexcept { return message_; }
    // The reference-style kind name of code().
    std::string_view kind() const noexcept { return error_kind(code()); }
    // The path the operating system refused or did not find (opening, stat or
    // reading a local file; creating the writer's temporary in a directory),
    // as the caller spelled it; empty when the error is not about one path.
    // Python sets OSError.filename from it. A ringsafe::status has no path.
    const std::string& path() const noexcept { return path_; }

private:
    std::string message_;
    std::string path_;
};

// The outcome of a non-throwing call: empty code() means success.
struct status {
    std::error_code code;
    std::string message;
    explicit operator bool() const noexcept { return !code; }  // true on success
    bool ok() const noexcept { return !code; }
    void clear() noexcept { code.clear(), message.clear(); }
};

// Throws ringsafe::error(ec, message).
[[noreturn]] void raise(std::error_code ec, const std::string& message);
[[noreturn]] void raise(errc e, const std::string& message);
// Throws a system_category error for errno value `err`; the message is "`what`: strerror(err)".
[[noreturn]] void raise_errno(int err, const std::string& what);
// The same, about file system path `path` (error::path()); `what` should name it too.
[[noreturn]] void raise_errno(int err, const std::string& what, const std::string& path);

}  // namespace ringsafe

template <>
struct std::is_error_code_enum<ringsafe::errc> : std::true_type {};

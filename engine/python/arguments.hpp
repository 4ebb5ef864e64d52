// How the bindings take arguments from Python, checked before any byte is
// read or written (engine-internal, the Python front end only):
// - buffers: C-contiguous memory only (a strided or reversed view is refused
//   with a TypeError, never read as if it were contiguous), writable where the
//   engine writes; the export is held while the engine uses the memory;
// - paths: what the operating system accepts (str, decoded with
//   surrogateescape as os.fsencode does, bytes, os.PathLike), and back;
// - tensor names: UTF-8, with a named error for a str that has no UTF-8 form;
// - keyword options: TypeError / ValueError naming the option;
// - the elements of the reads' sequence arguments: records read by attribute
//   name (ringsafe/_described.py's FileRange, RangeCopy, MemorySpan,
//   TensorRequest, AddressedRequest) or, the compatibility of the public
//   edge, tuples of the same fields in the same order; read here only.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringsafe::python {

// The bytes of a C-contiguous buffer `obj` to read; `hold` keeps the export
// (a memoryview) until the caller is done. TypeError naming `what` otherwise.
std::span<const std::byte> readable_bytes(const pybind11::handle& obj, const std::string& what,
                                          pybind11::object& hold);

// The bytes of a writable C-contiguous buffer `obj` the engine will write;
// the export (a memoryview, which also keeps a bytearray from resizing) is
// appended to `keep`. TypeError naming `what` otherwise.
std::span<std::byte> writable_bytes(const pybind11::handle& obj, const std::string& what,
                                    std::vector<pybind11::object>& keep);

// A path as the operating system takes it: str (os.fsencode's bytes), bytes
// or os.PathLike. TypeError naming `what` for anything else.
std::string path_arg(const pybind11::handle& obj, const char* what);

// A path back to Python as os.fsdecode gives it (undecodable bytes as surrogates).
pybind11::str path_str(const std::string& path);

// A spec as a person may see it: a URL with the values of its signing query
// parameters written "..." (without_url_secrets, the rule of every error
// message); a local path unchanged. What Reader.spec and ShardInfo.spec return.
std::string shown_spec(const std::string& spec);

// A str as UTF-8; nullopt (the Python error cleared) when it has none (it
// holds a lone surrogate). The one place the bindings encode a str they check.
std::optional<std::string> utf8_of(const pybind11::handle& obj);
// ascii(obj): how a message shows a str that may not be printable or encodable.
std::string ascii_of(const pybind11::handle& obj);

// A tensor name as UTF-8. SafetensorError (InvalidArgument) naming it, with
// ascii()'s escapes, when the str cannot be encoded (a lone surrogate);
// TypeError when it is not a str.
std::string tensor_name(const pybind11::handle& obj);
// Each name of a sequence (not a str) as tensor_name() takes it.
std::vector<std::string> tensor_names(const pybind11::handle& seq);

// An int argument (an int or an object with __index__, never a bool) as a
// long long, with `overflow` +1 / -1 when it does not fit one; nullopt when
// `v` is not an int (the caller raises its TypeError). The one place the
// bindings convert Python ints.
struct int_arg {
    long long value = 0;
    int overflow = 0;
};
std::optional<int_arg> index_int(const pybind11::handle& v);

// A count, size or offset: SafetensorError (InvalidArgument) "<what> must not
// be negative, got N" or "... is too large", TypeError when not an int.
std::uint64_t non_negative(const pybind11::handle& v, const std::string& what);

// Keyword options: TypeError naming `owner` and `key` when not of the type
// (an int is an int or has __index__, never a bool), ValueError naming the
// value when out of [lo, hi].
std::uint64_t option_uint(const pybind11::handle& v, const std::string& owner, const std::string& key,
                          std::uint64_t lo, std::uint64_t hi);
bool option_bool(const pybind11::handle& v, const std::string& owner, const std::string& key);
std::string option_str(const pybind11::handle& v, const std::string& owner, const std::string& key);

// ---------------------------------------------------------------- records or tuples
// One element of a sequence argument of `call`: a record whose `fields` are
// read by attribute name, or a tuple (or list) of those fields in that order.
// Returns the field values, unchecked. TypeError "<call> takes <record>
// records or (<fields>) tuples, not <type>" for anything else (naming the
// field a record lacks); SafetensorError (InvalidArgument) in the same words
// for a tuple of another length.
struct record_form {
    const char* call;    // "MappedFile.copy_to"
    const char* record;  // "RangeCopy"
    std::initializer_list<const char*> fields;
};
std::vector<pybind11::object> record_fields(const pybind11::handle& obj, const record_form& form);
// "<call> takes <record> records or (<fields>) tuples": what the errors about `form` say.
std::string expected_form(const record_form& form);

// MappedFile.populate's element: a FileRange or (offset, length).
struct file_range_arg {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};
file_range_arg file_range(const pybind11::handle& obj);

// MappedFile.copy_to's element: a RangeCopy or (offset, length, buffer); the
// buffer as given (copy_to checks it against the length).
struct range_copy_arg {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    pybind11::object buffer;
};
range_copy_arg range_copy(const pybind11::handle& obj);

// A raw destination of `call` (plan_tensors_at, read_to_device_at): a
// MemorySpan or (address, size). The memory is not checked (the low-level
// calls' contract).
std::span<std::byte> memory_span(const pybind11::handle& obj, const char* call);

// Reader.plan_requests' element: a TensorRequest or (name, box, buffer); the
// box and the buffer as given.
struct tensor_request_arg {
    std::string name;
    pybind11::object box;
    pybind11::object buffer;
};
tensor_request_arg tensor_request(const pybind11::handle& obj);

// plan_requests_at's element: an AddressedRequest or (name, box, address, size).
struct addressed_request_arg {
    std::string name;
    pybind11::object box;
    std::span<std::byte> dst;
};
addressed_request_arg addressed_request(const pybind11::handle& obj);

}  // namespace ringsafe::python

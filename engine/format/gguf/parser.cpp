// gguf::parser: ggml's reader as a resumable sequence of steps over a growing
// prefix. Each step reads one field (or one array element) whole or not at
// all, so that a prefix ending anywhere leaves the parse at a step boundary,
// resumed by the next feed() with more bytes.
#include <algorithm>
#include <iterator>
#include <limits>
#include <new>
#include <unordered_set>

#include "format/gguf/bytes.hpp"
#include "format/gguf/checks.hpp"
#include "ringsafe/gguf.hpp"

namespace ringsafe::gguf {
namespace {

namespace fg = ringsafe::format::gguf;

enum class step : std::uint8_t {
    magic, version, n_tensors, n_kv,                  // the preamble
    kv_key, kv_type, kv_array, kv_value,              // one key-value pair
    alignment,                                        // general.alignment, after the last pair
    t_name, t_n_dims, t_ne, t_type, t_offset,         // one tensor info
    place,                                            // offsets and the data section
    done,
};

// Hashing items of a vector by their name, so that a set of indices detects
// repeats without a second copy of every name.
template <class Get>
struct by_text {
    const void* owner;
    Get get;
    std::size_t operator()(std::uint32_t i) const { return std::hash<std::string_view>{}(get(owner, i)); }
    bool operator()(std::uint32_t a, std::uint32_t b) const { return get(owner, a) == get(owner, b); }
};

}  // namespace

struct parser::impl {
    impl(std::uint64_t size, const parse_options& o)
        : file_size(size), cap(o.max_header_size),
          keys(16, key_text{this, &key_of}, key_text{this, &key_of}),
          names(16, name_text{this, &name_of}, name_text{this, &name_of}) {}

    static std::string_view key_of(const void* p, std::uint32_t i) {
        return static_cast<const impl*>(p)->h.metadata[i].key;
    }
    // ggml keeps a tensor name as a C string: names equal up to a NUL are the same name.
    static std::string_view name_of(const void* p, std::uint32_t i) {
        const std::string& n = static_cast<const impl*>(p)->h.tensors[i].name;
        return std::string_view(n.c_str());
    }
    using key_text = by_text<decltype(&key_of)>;
    using name_text = by_text<decltype(&name_of)>;

    const std::uint64_t file_size;
    const std::uint64_t cap;  // max_header_size
    std::span<const std::byte> in;
    std::uint64_t pos = 0;   // bytes consumed
    std::uint64_t need = 0;  // when a step lacks bytes: the prefix length it needs
    step at = step::magic;
    bool failed = false;
    header h;
    std::int64_t n_tensors = 0, n_kv = 0;

    // The pair being read is h.metadata.back(); `elements` of it are read.
    std::uint64_t elements = 0;
    std::uint64_t kv_start = 0, array_start = 0;
    std::unordered_set<std::uint32_t, key_text, key_text> keys;
    std::int64_t alignment_index = -1;

    // The tensor info being read is h.tensors.back().
    std::uint32_t n_dims = 0, dim = 0;
    std::int64_t ne[4] = {1, 1, 1, 1};
    std::uint64_t info_start = 0;
    std::vector<std::uint64_t> sizes;  // bytes of each tensor
    std::unordered_set<std::uint32_t, name_text, name_text> names;

    // For the estimate: completed scalar pairs and tensor infos.
    std::uint64_t scalar_bytes = 0, scalars = 0, info_bytes = 0;

    const char* at_pos() const { return reinterpret_cast<const char*>(in.data()) + pos; }

    // The end of `n` bytes at pos, once the file holds them (Truncated naming
    // `what` otherwise) and they are within the header limit.
    std::uint64_t end_of(std::uint64_t n, const std::string& what) const {
        if (n > file_size || pos > file_size - n)
            raise(errc::Truncated, "the file (" + std::to_string(file_size) + " bytes) ends inside " + what +
                                       " at offset " + std::to_string(pos));
        if (pos + n > cap)
            raise(errc::HeaderTooLarge, "the GGUF header runs past " + std::to_string(cap) +
                                            " bytes (the limit, max_header_size) at " + what);
        return pos + n;
    }
    // The `n` bytes at pos; nullptr (need set) when the prefix ends first.
    const char* peek(std::uint64_t n, const std::string& what) {
        const std::uint64_t end = end_of(n, what);
        if (end > in.size()) {
            need = end;
            return nullptr;
        }
        return at_pos();
    }
    std::uint64_t left_after(std::uint64_t n) const { return file_size - pos - n; }

    // A string at pos: its length (8 bytes), ggml's limits on it, its bytes.
    // False (need set) when the prefix does not hold all of it yet.
    bool read_string(const std::string& what, std::string_view& out) {
        const char* p = peek(8, "the length of " + what);
        if (!p) return false;
        const std::uint64_t n = fg::load_le(p, 8);
        if (n > max_string_length)
            raise(errc::BadString, what + " at offset " + std::to_string(pos) + ": string length " +
                                       std::to_string(n) + " exceeds the maximum " + std::to_string(max_string_length));
        if (n > left_after(8))
            raise(errc::BadString, what + " at offset " + std::to_string(pos) + ": string length " +
                                       std::to_string(n) + " exceeds the " + std::to_string(left_after(8)) +
                                       " bytes left in the file");
        const std::uint64_t end = end_of(8 + n, what);
        if (end > in.size()) {
            need = end;
            return false;
        }
        out = std::string_view(at_pos() + 8, n);
        pos = end;
        return true;
    }

    std::string key_label() const { return "key '" + h.metadata.back().key + "'"; }
    std::string tensor_label() const { return "tensor '" + h.tensors.back().name + "'"; }

    bool run();
    bool run_kv();
    bool run_tensor();
    void end_kv();
    progress estimate() const;
};

bool parser::impl::run() {
    for (;;) {
        const char* p = nullptr;
        switch (at) {
            case step::magic:
                if (!(p = peek(4, "the magic"))) return false;
                fg::check_magic(p);
                pos += 4, at = step::version;
                break;
            case step::version:
                if (!(p = peek(4, "the version"))) return false;
                h.version = static_cast<std::uint32_t>(fg::load_le(p, 4));
                fg::check_version(h.version);
                pos += 4, at = step::n_tensors;
                break;
            case step::n_tensors:
                if (!(p = peek(8, "the tensor count"))) return false;
                n_tensors = static_cast<std::int64_t>(fg::load_le(p, 8));
                fg::check_counts_tensors(n_tensors);
                pos += 8, at = step::n_kv;
                break;
            case step::n_kv:
                if (!(p = peek(8, "the key-value count"))) return false;
                n_kv = static_cast<std::int64_t>(fg::load_le(p, 8));
                fg::check_counts_kv(n_kv);
                pos += 8, at = n_kv ? step::kv_key : step::alignment;
                break;
            case step::kv_key:
            case step::kv_type:
            case step::kv_array:
            case step::kv_value:
                if (!run_kv()) return false;
                break;
            case step::alignment:
                h.alignment = fg::alignment_of(alignment_index < 0 ? nullptr : &h.metadata[alignment_index]);
                at = n_tensors ? step::t_name : step::place;
                break;
            case step::t_name:
            case step::t_n_dims:
            case step::t_ne:
            case step::t_type:
            case step::t_offset:
                if (!run_tensor()) return false;
                break;
            case step::place:
                h.info_end = pos;
                fg::place_tensors(h, sizes, file_size);
                h.build_indexes();
                at = step::done;
                break;
            case step::done: return true;
        }
    }
}

bool parser::impl::run_kv() {
    const char* p = nullptr;
    switch (at) {
        case step::kv_key: {
            const std::string what = "the key of key-value pair " + std::to_string(h.metadata.size());
            const std::uint64_t start = pos;
            std::string_view key;
            if (!read_string(what, key)) return false;
            if (key.empty())
                raise(errc::BadKV, "key-value pair " + std::to_string(h.metadata.size()) + " (at offset " +
                                       std::to_string(start) + ") has an empty key");
            h.metadata.emplace_back().key.assign(key);
            const auto i = static_cast<std::uint32_t>(h.metadata.size() - 1);
            if (auto [it, fresh] = keys.insert(i); !fresh)
                raise(errc::DuplicateKey, "duplicate key '" + h.metadata.back().key + "' for key-value pair " +
                                              std::to_string(i) + " (at offset " + std::to_string(start) +
                                              "; first as pair " + std::to_string(*it) + ")");
            if (key == "general.alignment") alignment_index = i;
            kv_start = start;
            at = step::kv_type;
            return true;
        }
        case step::kv_type: {
            if (!(p = peek(4, "the value type of " + key_label()))) return false;
            const auto id = static_cast<std::uint32_t>(fg::load_le(p, 4));
            pos += 4;
            metadata_entry& e = h.metadata.back();
            if (id == static_cast<std::uint32_t>(value_type::ARRAY)) {
                e.type = value_type::ARRAY;
                at = step::kv_array;
                return true;
            }
            fg::check_value_type(id, e.key, false);
            e.type = e.element_type = static_cast<value_type>(id);
            e.count = 1, elements = 0, array_start = pos;
            at = step::kv_value;
            return true;
        }
        case step::kv_array: {
            if (!(p = peek(12, "the element type and count of array " + key_label()))) return false;
            const auto id = static_cast<std::uint32_t>(fg::load_le(p, 4));
            const std::uint64_t n = fg::load_le(p + 4, 8);
            metadata_entry& e = h.metadata.back();
            fg::check_value_type(id, e.key, true);
            e.element_type = static_cast<value_type>(id);
            const std::uint64_t each = id == static_cast<std::uint32_t>(value_type::STRING) ? 8 : value_type_size(e.element_type);
            const std::string where = "array " + key_label() + " (at offset " + std::to_string(pos) + ")";
            if (n > max_array_elements)
                raise(errc::BadArray, where + " has " + std::to_string(n) + " elements, more than the maximum " +
                                          std::to_string(max_array_elements));
            if (n > left_after(12) / each)
                raise(errc::BadArray, where + " has " + std::to_string(n) + " elements of at least " +
                                          std::to_string(each) + " bytes, more than the " +
                                          std::to_string(left_after(12)) + " bytes left in the file");
            pos += 12;
            if (n * each > cap || pos > cap - n * each)
                raise(errc::HeaderTooLarge, "the GGUF header runs past " + std::to_string(cap) +
                                                " bytes (the limit, max_header_size) at " + where);
            e.count = n, elements = 0, array_start = pos;
            at = step::kv_value;
            return true;
        }
        default: break;
    }
    metadata_entry& e = h.metadata.back();
    if (e.element_type == value_type::STRING) {
        if (e.offsets.empty()) e.offsets.push_back(0);
        for (; elements < e.count; ++elements) {
            std::string_view s;
            const std::string what = e.is_array() ? "string " + std::to_string(elements) + " of array " + key_label()
                                                  : "the value of " + key_label();
            if (!read_string(what, s)) return false;
            e.data.append(s);
            e.offsets.push_back(e.data.size());
        }
    } else {
        const std::uint32_t size = value_type_size(e.element_type);
        while (elements < e.count) {
            if (!(p = peek(size, e.is_array() ? "array " + key_label() : "the value of " + key_label()))) return false;
            // Every whole element the prefix holds, at once (the file holds them all: checked above).
            const std::uint64_t fit = std::min<std::uint64_t>(e.count - elements, (in.size() - pos) / size);
            e.data.append(p, fit * size);
            pos += fit * size, elements += fit;
        }
    }
    end_kv();
    return true;
}

void parser::impl::end_kv() {
    if (!h.metadata.back().is_array()) scalar_bytes += pos - kv_start, ++scalars;
    at = static_cast<std::int64_t>(h.metadata.size()) < n_kv ? step::kv_key : step::alignment;
}

bool parser::impl::run_tensor() {
    const char* p = nullptr;
    switch (at) {
        case step::t_name: {
            const std::uint64_t start = pos;
            const std::string what = "the name of tensor " + std::to_string(h.tensors.size());
            std::string_view name;
            if (!read_string(what, name)) return false;
            if (name.size() > max_name_length)
                raise(errc::BadTensorInfo, "tensor name " + std::to_string(h.tensors.size()) + " (at offset " +
                                               std::to_string(start) + ") is too long: " +
                                               std::to_string(name.size()) + " >= " +
                                               std::to_string(max_name_length + 1) + " bytes");
            h.tensors.emplace_back().name.assign(name);
            const auto i = static_cast<std::uint32_t>(h.tensors.size() - 1);
            if (auto [it, fresh] = names.insert(i); !fresh)
                raise(errc::DuplicateTensor, "duplicate tensor name '" + h.tensors.back().name + "' for tensor " +
                                                 std::to_string(i) + " (at offset " + std::to_string(start) +
                                                 "; first as tensor " + std::to_string(*it) + ")");
            info_start = start;
            at = step::t_n_dims;
            return true;
        }
        case step::t_n_dims:
            if (!(p = peek(4, "the number of dimensions of " + tensor_label()))) return false;
            n_dims = static_cast<std::uint32_t>(fg::load_le(p, 4));
            fg::check_n_dims(h.tensors.back().name, n_dims);
            pos += 4, dim = 0;
            for (auto& d : ne) d = 1;
            at = step::t_ne;
            return true;
        case step::t_ne:
            for (; dim < n_dims; ++dim) {
                if (!(p = peek(8, "dimension " + std::to_string(dim) + " of " + tensor_label()))) return false;
                ne[dim] = static_cast<std::int64_t>(fg::load_le(p, 8));
                pos += 8;
                fg::check_ne(h.tensors.back().name, dim, ne[dim]);
            }
            fg::check_elements(h.tensors.back().name, ne);
            at = step::t_type;
            return true;
        case step::t_type: {
            if (!(p = peek(4, "the type of " + tensor_label()))) return false;
            const auto type = static_cast<std::int32_t>(fg::load_le(p, 4));
            sizes.push_back(fg::check_type(h.tensors.back().name, type, ne));
            pos += 4;
            tensor_info& t = h.tensors.back();
            t.ggml = static_cast<ggml_type>(type);
            t.dtype = ggml_plain_dtype(t.ggml).value_or(dtype::U8);
            t.shape.assign(std::make_reverse_iterator(ne + n_dims), std::make_reverse_iterator(ne + 0));
            at = step::t_offset;
            return true;
        }
        default: break;
    }
    if (!(p = peek(8, "the offset of " + tensor_label()))) return false;
    h.tensors.back().begin = fg::load_le(p, 8);
    pos += 8;
    info_bytes += pos - info_start;
    at = static_cast<std::int64_t>(h.tensors.size()) < n_tensors ? step::t_name : step::place;
    return true;
}

progress parser::impl::estimate() const {
    // Where the parse is, plus the rest of the value being read, plus the
    // pairs and tensor infos not begun, each at the average size of those read.
    double end = static_cast<double>(pos);
    std::uint64_t kv_left = 0, infos_left = 0;
    const bool in_kv = at >= step::kv_type && at <= step::kv_value;
    if (at <= step::n_kv) {
        end += 64;
    } else if (at <= step::alignment) {
        kv_left = static_cast<std::uint64_t>(n_kv) - h.metadata.size();
        if (in_kv) {
            const metadata_entry& e = h.metadata.back();
            const std::uint64_t rest = at == step::kv_value ? e.count - elements : 0;
            if (e.element_type == value_type::STRING) {
                const double avg = elements ? static_cast<double>(pos - array_start) / static_cast<double>(elements) : 16.0;
                end += static_cast<double>(rest) * avg;
            } else {
                end += static_cast<double>(rest * value_type_size(e.element_type));
            }
            if (at != step::kv_value) end += 16;
        }
        infos_left = static_cast<std::uint64_t>(n_tensors);
    } else if (at < step::place) {
        infos_left = static_cast<std::uint64_t>(n_tensors) - h.tensors.size() + (at == step::t_name ? 0 : 1);
    }
    end += static_cast<double>(kv_left) * (scalars ? static_cast<double>(scalar_bytes) / static_cast<double>(scalars) : 40.0);
    const std::size_t infos_done = h.tensors.size() - (at > step::t_name && at < step::place ? 1 : 0);
    end += static_cast<double>(infos_left) *
           (infos_done ? static_cast<double>(info_bytes) / static_cast<double>(infos_done) : 64.0);
    const std::uint64_t top = std::min(file_size, cap);
    const double capped = std::min(end, static_cast<double>(top));
    progress r;
    r.need = need;
    r.estimate = std::max<std::uint64_t>(need, static_cast<std::uint64_t>(capped));
    return r;
}

parser::parser(std::uint64_t file_size, const parse_options& opts) : p_(std::make_unique<impl>(file_size, opts)) {}
parser::~parser() = default;
parser::parser(parser&&) noexcept = default;
parser& parser::operator=(parser&&) noexcept = default;

progress parser::feed(std::span<const std::byte> prefix) {
    impl& p = *p_;
    if (p.failed) raise(errc::InvalidArgument, "gguf::parser: fed again after it failed");
    if (prefix.size() < p.in.size())
        raise(errc::InvalidArgument, "gguf::parser: fed a prefix of " + std::to_string(prefix.size()) +
                                         " bytes after one of " + std::to_string(p.in.size()));
    p.in = prefix;
    p.failed = true;  // until the steps below return
    const bool done = p.run();
    p.failed = false;
    if (done) return progress{true, 0, 0};
    return p.estimate();
}

header parser::finish() {
    impl& p = *p_;
    if (p.failed || p.at != step::done)
        raise(errc::InvalidArgument, "gguf::parser: finish() before the header was parsed (at offset " +
                                         std::to_string(p.pos) + ")");
    p.failed = true;
    return std::move(p.h);
}

header parse(std::span<const std::byte> prefix, std::uint64_t file_size, const parse_options& opts) {
    if (file_size == 0) file_size = prefix.size();
    if (prefix.size() > file_size)
        raise(errc::InvalidArgument, "gguf::parse: a prefix of " + std::to_string(prefix.size()) +
                                         " bytes of a " + std::to_string(file_size) + "-byte file");
    parser ps(file_size, opts);
    const progress pr = ps.feed(prefix);
    if (!pr.done)
        raise(errc::InvalidArgument, "gguf::parse: the header goes on past the " + std::to_string(prefix.size()) +
                                         " bytes given (to at least offset " + std::to_string(pr.need) + ")");
    return ps.finish();
}

std::optional<header> parse(std::span<const std::byte> prefix, std::uint64_t file_size, const parse_options& opts,
                            status& st) noexcept {
    st.clear();
    try {
        return parse(prefix, file_size, opts);
    } catch (const error& e) {
        st.code = e.code();
        st.message = e.message();
    } catch (const std::bad_alloc&) {
        st.code = std::make_error_code(std::errc::not_enough_memory);
        st.message = "out of memory while parsing a GGUF header";
    } catch (const std::exception& e) {
        st.code = make_error_code(errc::IoError);
        st.message = e.what();
    }
    return std::nullopt;
}

}  // namespace ringsafe::gguf

// .npy header parsing (npy_input.hpp).
#include "npy_input.hpp"

#include <cstring>

#include "ringsafe/error.hpp"

namespace ringsafe::cli {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& why) {
    raise(errc::InvalidArgument, "'" + path + "' is not a usable .npy file: " + why);
}

std::uint64_t le(std::string_view s, std::size_t at, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
    return v;
}

// Finds `'key':` in the dict text and returns the position after the colon.
std::size_t find_key(std::string_view dict, std::string_view key, const std::string& path) {
    for (char q : {'\'', '"'}) {
        std::string k(1, q);  // appended piecewise: '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
        k.append(key).push_back(q);
        auto at = dict.find(k);
        if (at == std::string_view::npos) continue;
        at = dict.find(':', at + k.size());
        if (at != std::string_view::npos) return at + 1;
    }
    bad(path, "its header has no '" + std::string(key) + "'");
}

std::size_t skip_ws(std::string_view s, std::size_t i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
    return i;
}

}  // namespace

std::uint64_t npy_header_size(std::string_view head) {
    if (head.size() < 12) return 0;
    auto major = static_cast<unsigned char>(head[6]);
    return major == 1 ? 10 + le(head, 8, 2) : 12 + le(head, 8, 4);
}

dtype dtype_from_descr(std::string_view descr, const std::string& path) {
    if (descr.size() < 3) bad(path, "dtype '" + std::string(descr) + "' is not supported");
    char order = descr[0];
    std::string_view code = descr.substr(1);
    struct row {
        const char* code;
        dtype t;
    };
    static const row table[] = {
        {"b1", dtype::BOOL}, {"u1", dtype::U8},   {"i1", dtype::I8},   {"i2", dtype::I16},
        {"u2", dtype::U16},  {"f2", dtype::F16},  {"i4", dtype::I32},  {"u4", dtype::U32},
        {"f4", dtype::F32},  {"i8", dtype::I64},  {"u8", dtype::U64},  {"f8", dtype::F64},
        {"c8", dtype::C64},
    };
    for (auto& r : table) {
        if (code != r.code) continue;
        bool one_byte = code[1] == '1';
        if (order == '>' && !one_byte) bad(path, "big-endian data ('" + std::string(descr) + "') is not supported");
        if (order != '<' && order != '|' && order != '=' && order != '>')
            bad(path, "dtype '" + std::string(descr) + "' is not supported");
        return r.t;
    }
    bad(path, "numpy dtype '" + std::string(descr) + "' has no safetensors equivalent");
}

npy_layout parse_npy(std::string_view head, const std::string& path) {
    if (head.size() < 12 || std::memcmp(head.data(), "\x93NUMPY", 6) != 0) bad(path, "no NUMPY magic");
    auto major = static_cast<unsigned char>(head[6]);
    if (major < 1 || major > 3) bad(path, "format version " + std::to_string(major) + " is unknown");
    npy_layout out;
    out.data_offset = npy_header_size(head);
    if (head.size() < out.data_offset) bad(path, "header is truncated");
    std::string_view dict = head.substr(major == 1 ? 10 : 12, out.data_offset - (major == 1 ? 10 : 12));

    std::size_t i = skip_ws(dict, find_key(dict, "descr", path));
    if (i >= dict.size() || (dict[i] != '\'' && dict[i] != '"')) bad(path, "descr is not a string (structured arrays are not supported)");
    auto close = dict.find(dict[i], i + 1);
    if (close == std::string_view::npos) bad(path, "descr is not terminated");
    out.dtype = dtype_from_descr(dict.substr(i + 1, close - i - 1), path);

    i = skip_ws(dict, find_key(dict, "fortran_order", path));
    if (dict.substr(i, 4) == "True") bad(path, "Fortran-ordered arrays are not supported (save it C-contiguous)");
    if (dict.substr(i, 5) != "False") bad(path, "fortran_order is neither True nor False");

    i = skip_ws(dict, find_key(dict, "shape", path));
    if (i >= dict.size() || dict[i] != '(') bad(path, "shape is not a tuple");
    for (++i;;) {
        i = skip_ws(dict, i);
        if (i < dict.size() && dict[i] == ')') break;
        std::uint64_t v = 0;
        std::size_t start = i;
        while (i < dict.size() && dict[i] >= '0' && dict[i] <= '9') {
            if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, std::uint64_t(dict[i] - '0'), &v))
                bad(path, "a dimension overflows 64 bits");
            ++i;
        }
        if (i == start) bad(path, "shape holds something other than non-negative integers");
        out.shape.push_back(v);
        i = skip_ws(dict, i);
        if (i < dict.size() && dict[i] == ',') ++i;
        else if (i >= dict.size() || dict[i] != ')') bad(path, "shape tuple is malformed");
    }
    return out;
}

}  // namespace ringsafe::cli

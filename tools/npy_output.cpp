// Writing tensors as `.npy`.
#include "npy_output.hpp"

namespace ringsafe::cli {

std::optional<std::string_view> npy_descr(ringsafe::dtype t) noexcept {
    using ringsafe::dtype;
    switch (t) {
        case dtype::BOOL: return "|b1";
        case dtype::U8: return "|u1";
        case dtype::I8: return "|i1";
        case dtype::I16: return "<i2";
        case dtype::U16: return "<u2";
        case dtype::F16: return "<f2";
        case dtype::I32: return "<i4";
        case dtype::U32: return "<u4";
        case dtype::F32: return "<f4";
        case dtype::F64: return "<f8";
        case dtype::I64: return "<i8";
        case dtype::U64: return "<u8";
        case dtype::C64: return "<c8";
        default: return std::nullopt;
    }
}

std::string npy_header(std::string_view descr, const std::vector<std::uint64_t>& shape) {
    std::string dict = "{'descr': '";
    dict.append(descr).append("', 'fortran_order': False, 'shape': (");
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) dict.append(", ");
        dict.append(std::to_string(shape[i]));
    }
    if (shape.size() == 1) dict += ',';
    dict.append("), }");
    // Version 1.0 has a 2-byte header length; fall back to 2.0 (4 bytes) when needed.
    const bool v2 = dict.size() + 1 + 10 > 65535;
    const std::size_t fixed = v2 ? 12 : 10;
    std::size_t len = dict.size() + 1;
    len += (64 - (fixed + len) % 64) % 64;
    dict.resize(len - 1, ' ');
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(v2 ? 2 : 1);
    out += '\0';
    for (std::size_t b = 0; b < (v2 ? 4u : 2u); ++b) out += static_cast<char>((len >> (8 * b)) & 0xFF);
    return out + dict;
}

std::string file_name_for(std::string_view tensor) {
    std::string out;
    for (char c : tensor) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                        c == '.' || c == '_' || c == '-';
        out += ok ? c : '_';
    }
    if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
    return out;
}

}  // namespace ringsafe::cli

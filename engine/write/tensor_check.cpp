// Input validation for the writer (tensor_check.hpp).
#include "write/tensor_check.hpp"

#include "ringsafe/error.hpp"

namespace ringsafe::write {

bool valid_utf8(std::string_view s) noexcept {
    auto u = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    std::size_t i = 0, n = s.size();
    while (i < n) {
        unsigned c = u(i);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        else return false;
        if (i + len > n) return false;
        for (std::size_t k = 1; k < len; ++k) {
            unsigned cc = u(i + k);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        i += len;
    }
    return true;
}

std::string describe_tensor(std::string_view name) {
    std::string out = "tensor '";
    for (char ch : name) {
        auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7F) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    return out + "'";
}

std::uint64_t tensor_bytes(std::string_view name, dtype t, std::span<const std::uint64_t> shape) {
    std::uint64_t count = 1;
    for (auto d : shape) {
        if (__builtin_mul_overflow(count, d, &count))
            raise(errc::ValidationOverflow, describe_tensor(name) + ": element count overflows 64 bits");
    }
    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(count, std::uint64_t{dtype_bits(t)}, &bits))
        raise(errc::ValidationOverflow, describe_tensor(name) + ": size in bits overflows 64 bits");
    if (bits % 8 != 0)
        raise(errc::MisalignedSlice, describe_tensor(name) + ": " + std::to_string(count) + " elements of " +
                                         std::string(dtype_name(t)) + " are not a whole number of bytes");
    return bits / 8;
}

void check_name(std::string_view name, const std::unordered_set<std::string>& seen) {
    if (!valid_utf8(name)) raise(errc::InvalidArgument, describe_tensor(name) + ": name is not valid UTF-8");
    if (name == "__metadata__")
        raise(errc::InvalidArgument, "'__metadata__' is reserved and cannot name a tensor");
    if (seen.count(std::string(name)))
        raise(errc::DuplicateTensorName, describe_tensor(name) + " is written twice");
}

void check_metadata(const metadata_map& m) {
    for (auto& [k, v] : m) {
        if (!valid_utf8(k)) raise(errc::InvalidArgument, "metadata key '" + k + "' is not valid UTF-8");
        if (!valid_utf8(v)) raise(errc::InvalidArgument, "metadata value of '" + k + "' is not valid UTF-8");
    }
}

}  // namespace ringsafe::write

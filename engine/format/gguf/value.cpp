// GGUF metadata values: the type table, typed element access, making entries.
#include <array>
#include <cstring>
#include <limits>

#include "format/gguf/bytes.hpp"
#include "ringsafe/gguf.hpp"

namespace ringsafe::gguf {
namespace {

struct type_row {
    std::string_view name;
    std::uint32_t size;
};
constexpr std::array<type_row, value_type_count> types{{
    {"UINT8", 1},
    {"INT8", 1},
    {"UINT16", 2},
    {"INT16", 2},
    {"UINT32", 4},
    {"INT32", 4},
    {"FLOAT32", 4},
    {"BOOL", 1},
    {"STRING", 0},
    {"ARRAY", 0},
    {"UINT64", 8},
    {"INT64", 8},
    {"FLOAT64", 8},
}};

bool is_unsigned(value_type t) {
    return t == value_type::UINT8 || t == value_type::UINT16 || t == value_type::UINT32 || t == value_type::UINT64;
}
bool is_signed(value_type t) {
    return t == value_type::INT8 || t == value_type::INT16 || t == value_type::INT32 || t == value_type::INT64;
}

[[noreturn]] void bad_entry(const std::string& key, const std::string& why) {
    raise(errc::InvalidArgument, "metadata key '" + key + "': " + why);
}

// Appends one element of fixed-size type `t` holding `v`; false when it does not fit.
bool append_element(std::string& out, value_type t, const scalar& v) {
    const std::uint32_t size = value_type_size(t);
    std::uint64_t bits = 0;
    if (is_unsigned(t) || is_signed(t)) {
        const unsigned width = size * 8;
        if (const auto* u = std::get_if<std::uint64_t>(&v)) {
            const std::uint64_t max = is_unsigned(t) ? (width == 64 ? ~0ull : (1ull << width) - 1)
                                                     : (1ull << (width - 1)) - 1;
            if (*u > max) return false;
            bits = *u;
        } else if (const auto* s = std::get_if<std::int64_t>(&v)) {
            if (is_unsigned(t)) {
                if (*s < 0 || (width < 64 && static_cast<std::uint64_t>(*s) >= (1ull << width))) return false;
            } else if (width < 64 && (*s < -(1ll << (width - 1)) || *s >= (1ll << (width - 1)))) {
                return false;
            }
            bits = static_cast<std::uint64_t>(*s);
        } else {
            return false;
        }
    } else if (t == value_type::FLOAT32 || t == value_type::FLOAT64) {
        const auto* d = std::get_if<double>(&v);
        if (!d) return false;
        if (t == value_type::FLOAT64) {
            std::memcpy(&bits, d, 8);
        } else {
            const float f = static_cast<float>(*d);
            std::uint32_t b32 = 0;
            std::memcpy(&b32, &f, 4);
            bits = b32;
        }
    } else if (t == value_type::BOOL) {
        const auto* b = std::get_if<bool>(&v);
        if (!b) return false;
        bits = *b ? 1 : 0;
    } else {
        return false;
    }
    for (std::uint32_t i = 0; i < size; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
    return true;
}

}  // namespace

std::string_view value_type_name(value_type t) noexcept {
    const auto i = static_cast<std::uint32_t>(t);
    return i < types.size() ? types[i].name : std::string_view();
}

std::optional<value_type> value_type_from_name(std::string_view name) noexcept {
    for (std::uint32_t i = 0; i < types.size(); ++i)
        if (!name.empty() && types[i].name == name) return static_cast<value_type>(i);
    return std::nullopt;
}

std::uint32_t value_type_size(value_type t) noexcept {
    const auto i = static_cast<std::uint32_t>(t);
    return i < types.size() ? types[i].size : 0;
}

scalar metadata_entry::value(std::uint64_t i) const {
    if (i >= count)
        raise(errc::InvalidArgument, "metadata key '" + key + "': element " + std::to_string(i) + " of " +
                                         std::to_string(count));
    const value_type t = element_type;
    if (t == value_type::STRING) return string_at(i);
    const std::uint32_t size = value_type_size(t);
    const char* p = data.data() + i * size;
    const std::uint64_t bits = format::gguf::load_le(p, size);
    switch (t) {
        case value_type::UINT8:
        case value_type::UINT16:
        case value_type::UINT32:
        case value_type::UINT64: return bits;
        case value_type::INT8: return std::int64_t{static_cast<std::int8_t>(bits)};
        case value_type::INT16: return std::int64_t{static_cast<std::int16_t>(bits)};
        case value_type::INT32: return std::int64_t{static_cast<std::int32_t>(bits)};
        case value_type::INT64: return static_cast<std::int64_t>(bits);
        case value_type::FLOAT32: {
            float f;
            const auto b32 = static_cast<std::uint32_t>(bits);
            std::memcpy(&f, &b32, 4);
            return static_cast<double>(f);
        }
        case value_type::FLOAT64: {
            double d;
            std::memcpy(&d, &bits, 8);
            return d;
        }
        case value_type::BOOL: return bits != 0;
        default: break;
    }
    raise(errc::InvalidArgument, "metadata key '" + key + "' has no value of type " +
                                     std::to_string(static_cast<std::uint32_t>(t)));
}

std::string_view metadata_entry::string_at(std::uint64_t i) const {
    if (element_type != value_type::STRING)
        raise(errc::InvalidArgument, "metadata key '" + key + "' holds " +
                                         std::string(value_type_name(element_type)) + ", not STRING");
    if (i >= count || offsets.size() != count + 1)
        raise(errc::InvalidArgument, "metadata key '" + key + "': string " + std::to_string(i) + " of " +
                                         std::to_string(count));
    return std::string_view(data).substr(offsets[i], offsets[i + 1] - offsets[i]);
}

std::optional<std::int64_t> metadata_entry::as_integer() const noexcept {
    if (is_array() || count != 1) return std::nullopt;
    if (!is_unsigned(type) && !is_signed(type)) return std::nullopt;
    const scalar v = value(0);
    if (const auto* s = std::get_if<std::int64_t>(&v)) return *s;
    const std::uint64_t u = std::get<std::uint64_t>(v);
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
}

std::optional<std::string_view> metadata_entry::as_string() const noexcept {
    if (type != value_type::STRING || offsets.size() != 2) return std::nullopt;
    return std::string_view(data).substr(offsets[0], offsets[1] - offsets[0]);
}

metadata_entry metadata_entry::make(std::string key, value_type t, const scalar& v) {
    metadata_entry e;
    e.key = std::move(key);
    e.type = e.element_type = t;
    e.count = 1;
    if (t == value_type::STRING) {
        const auto* s = std::get_if<std::string_view>(&v);
        if (!s) bad_entry(e.key, "a STRING value needs a string");
        e.data.assign(*s);
        e.offsets = {0, s->size()};
    } else if (value_type_size(t) == 0 || !append_element(e.data, t, v)) {
        bad_entry(e.key, "the value does not fit type " + std::string(value_type_name(t)) + " (" +
                             std::to_string(static_cast<std::uint32_t>(t)) + ")");
    }
    return e;
}

metadata_entry metadata_entry::make_array(std::string key, value_type element, std::span<const scalar> values) {
    metadata_entry e;
    e.key = std::move(key);
    e.type = value_type::ARRAY;
    e.element_type = element;
    e.count = values.size();
    if (element == value_type::STRING) {
        e.offsets.reserve(values.size() + 1);
        e.offsets.push_back(0);
        for (const scalar& v : values) {
            const auto* s = std::get_if<std::string_view>(&v);
            if (!s) bad_entry(e.key, "a STRING array holds strings only");
            e.data.append(*s);
            e.offsets.push_back(e.data.size());
        }
        return e;
    }
    if (value_type_size(element) == 0)
        bad_entry(e.key, "arrays of " + std::string(value_type_name(element)) + " (" +
                             std::to_string(static_cast<std::uint32_t>(element)) + ") do not exist");
    e.data.reserve(values.size() * value_type_size(element));
    for (std::size_t i = 0; i < values.size(); ++i)
        if (!append_element(e.data, element, values[i]))
            bad_entry(e.key, "element " + std::to_string(i) + " does not fit " +
                                 std::string(value_type_name(element)));
    return e;
}

}  // namespace ringsafe::gguf

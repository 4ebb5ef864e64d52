// Header field lookups (header_fields.hpp).
#include "http/header_fields.hpp"

#include <algorithm>
#include <cctype>

namespace ringsafe::http {

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::string field_value(const header_fields& fields, std::string_view name) {
    for (const auto& [k, v] : fields)
        if (iequals(k, name)) return v;
    return {};
}

}  // namespace ringsafe::http

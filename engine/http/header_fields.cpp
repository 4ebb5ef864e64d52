// Header field lookups (header_fields.hpp).
#include "http/header_fields.hpp"

namespace ringsafe::http {

std::string field_value(const header_fields& fields, std::string_view name) {
    for (const auto& [k, v] : fields)
        if (iequals(k, name)) return v;
    return {};
}

}  // namespace ringsafe::http

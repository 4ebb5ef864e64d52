// Header fields as a request or response carries them: a list of name/value
// pairs, looked up by name in any case (RFC 9110: field names are
// case-insensitive).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/ascii_case.hpp"

namespace ringsafe::http {

using header_fields = std::vector<std::pair<std::string, std::string>>;

// The value of the first field named `name` (any case); empty when none.
std::string field_value(const header_fields& fields, std::string_view name);

}  // namespace ringsafe::http

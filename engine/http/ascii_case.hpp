// Protocol text in any ASCII case (schemes, hosts, field names; RFC 9110 and
// RFC 3986 compare them without case) and its blanks, for engine/http and the
// stores and dispatcher above it.
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::http {

// Whether `a` and `b` are equal but for ASCII case.
bool iequals(std::string_view a, std::string_view b) noexcept;
// Whether `s` starts with `prefix` but for ASCII case.
bool starts_with_icase(std::string_view s, std::string_view prefix) noexcept;
// `s` with ASCII letters lower-cased.
std::string lower(std::string_view s);
// `s` without leading and trailing spaces and tabs (a field value's OWS).
std::string trim(std::string_view s);
// `s` as an error message shows text a peer sent: bytes outside printable ASCII as \xNN.
std::string printable(std::string_view s);

}  // namespace ringsafe::http

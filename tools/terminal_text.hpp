// Text that came from a checkpoint, a server or the command line, made safe to
// print on a terminal and to show a person: one rule for every human-readable
// line the CLI prints (--json output is JSON-escaped instead and does not use
// it; the only URLs it holds are in error messages, which never show secrets).
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::cli {

// `text` with everything a terminal would act on shown as a visible escape, as
// git and `ls -b` do: C0 controls (\e, \r, \n, \t, \b, \0; others \x01), DEL
// (\x7f), C1 controls (\u0080..\u009f), bidirectional controls (\u202e, ...),
// and bytes that are not strict UTF-8 (\xff); a backslash becomes \\. Other
// text, printable UTF-8 included, is unchanged. Embedded NULs are escaped too,
// so the result is safe to print with %s. The values of a URL's signing query
// parameters (a presigned or SAS URL's) are written "...", as in every error
// message (ringsafe::without_url_secrets).
std::string terminal_text(std::string_view text);

// Length of the strict UTF-8 sequence at text[i] (1 to 4) and its code point
// in `cp`; 0 when it is not one (overlong, surrogate, above U+10FFFF,
// truncated, a stray continuation byte). text[i] must be >= 0x80.
std::size_t utf8_sequence(std::string_view text, std::size_t i, char32_t& cp);

}  // namespace ringsafe::cli

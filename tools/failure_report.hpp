// How a subcommand reports the error that ended it, in one place: its kind and
// its whole message, as one terminal-safe line on stderr or as a JSON object.
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::cli {

// The error that ended a command: its kind ("InvalidHeader", "IoError", ...)
// and its message, naming what failed (NULs and all).
struct failure {
    std::string kind;
    std::string message;
};

// The failure of the exception being handled; call only inside a catch block.
// ringsafe::error gives its kind and message, another std::system_error the
// kind of its code, std::bad_alloc that of ENOMEM ("out of memory"), anything else "Error".
failure current_failure();

// With `json`: one line {"ok":false,"error_kind":KIND,"error":MESSAGE} on
// stdout. Else one line on stderr, "PREFIX: KIND: MESSAGE" (PREFIX e.g.
// "ringsafe cp"), "PREFIX: SOURCE: KIND: MESSAGE" when `source` is not empty
// and the message does not name it; every part through terminal_text().
void report_failure(std::string_view prefix, const failure& f, std::string_view source, bool json);

}  // namespace ringsafe::cli

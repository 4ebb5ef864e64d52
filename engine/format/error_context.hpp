// Adding context (a path, a shard) in front of an error's message, and
// turning an exception into a status.
#pragma once

#include <string>

#include "ringsafe/error.hpp"

namespace ringsafe::format {

// The message an error was built with: ringsafe::error's what() as is; for
// other std::system_errors, what() without the ": <category message>" they append.
inline std::string bare_message(const std::system_error& e) {
    if (dynamic_cast<const ringsafe::error*>(&e)) return e.what();
    std::string what = e.what();
    std::string suffix = ": " + e.code().message();
    if (what.size() >= suffix.size() && what.ends_with(suffix)) what.resize(what.size() - suffix.size());
    return what;
}

// The path a ringsafe::error is about (error::path()); empty for other errors.
inline std::string path_of(const std::system_error& e) {
    const auto* r = dynamic_cast<const ringsafe::error*>(&e);
    return r ? r->path() : std::string();
}

// Throws `e` again with `prefix` in front of its message, unless the message
// already contains `name` (then it throws e unchanged); its path() is kept.
[[noreturn]] inline void rethrow_with(const std::system_error& e, const std::string& name,
                                      const std::string& prefix) {
    std::string msg = bare_message(e);
    if (!name.empty() && msg.find(without_url_secrets(name)) != std::string::npos) throw error(e.code(), msg, path_of(e));
    throw error(e.code(), prefix + msg, path_of(e));
}

// The status& overloads' one body: runs `fn` and returns true, or reports in
// `st` how it failed instead of throwing: a std::system_error's code and bare
// message; any other exception as IoError, with `context` (the path or URL,
// may be empty) in front of what(). `st` is cleared first.
template <class F>
bool capture_status(status& st, const std::string& context, F&& fn) noexcept {
    st.clear();
    try {
        fn();
        return true;
    } catch (const std::system_error& e) {
        st.code = e.code();
        st.message = bare_message(e);
    } catch (const std::exception& e) {
        st.code = make_error_code(errc::IoError);
        st.message = context.empty() ? std::string(e.what()) : context + ": " + e.what();
    }
    return false;
}

}  // namespace ringsafe::format

// The process environment as options and credentials read it: how a variable
// is read, what counts as true, and "~" in a path. engine/http's settings and
// every store (engine/stores) read their variables through these.
#pragma once

#include <string>

namespace ringsafe::http {

// The value of environment variable `name`; empty when it is unset.
std::string env_text(const char* name);

// Whether `name` is set to 1, ON, YES or TRUE, in any case (huggingface_hub's
// constants._is_true; Run:ai's switches read the same).
bool env_true(const char* name);

// `path` with a leading "~" or "~/" replaced by $HOME (os.path.expanduser);
// as it is when $HOME is unset.
std::string expand_home(std::string path);

}  // namespace ringsafe::http

// The process environment as options and credentials read it: how a variable
// is read, what counts as true, and "~" in a path. engine/http's settings and
// every store (engine/stores) read their variables through these.
#pragma once

#include <initializer_list>
#include <string>

namespace ringsafe::http {

// The value of environment variable `name`; empty when it is unset.
std::string env_text(const char* name);

// When `field` is empty, fills it with the first of the variables `names`
// that is set and not empty, and returns that variable's name; nullptr when
// `field` was set or none is. Every store's options take their defaults so.
const char* fill_from_env(std::string& field, std::initializer_list<const char*> names);

// Whether `name` is set to 1, ON, YES or TRUE, in any case (huggingface_hub's
// constants._is_true; Run:ai's switches read the same).
bool env_true(const char* name);

// `path` with a leading "~" or "~/" replaced by $HOME (os.path.expanduser);
// as it is when $HOME is unset.
std::string expand_home(std::string path);

}  // namespace ringsafe::http

// Environment variables (environment.hpp).
#include "http/environment.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace ringsafe::http {

std::string env_text(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

const char* fill_from_env(std::string& field, std::initializer_list<const char*> names) {
    if (!field.empty()) return nullptr;
    for (const char* name : names)
        if (!(field = env_text(name)).empty()) return name;
    return nullptr;
}

bool env_true(const char* name) {
    std::string v = env_text(name);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string expand_home(std::string path) {
    if (path == "~" || path.starts_with("~/")) {
        const std::string home = env_text("HOME");
        if (!home.empty()) path = home + path.substr(1);
    }
    return path;
}

}  // namespace ringsafe::http

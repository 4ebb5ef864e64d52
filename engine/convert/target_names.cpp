// What a target's name says: its format (by extension) and, for a split GGUF
// target, its parts' names; the sink chosen by it.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "convert/sink.hpp"
#include "ringsafe/convert.hpp"

namespace ringsafe {

bool gguf_target(const std::string& path) {
    if (path.size() < 5) return false;
    std::string ext = path.substr(path.size() - 5);
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".gguf";
}

std::string split_part_name(const std::string& out, std::size_t no, std::size_t count) {
    char tail[40];
    std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.gguf", no + 1, count);
    return out.substr(0, out.size() - 5) + tail;  // OUT ends in .gguf (gguf_target)
}

namespace convert {

std::unique_ptr<sink> make_sink(const reader& r, const selection& sel, const std::string& out, const sink_options& o) {
    if (gguf_target(out)) return make_gguf_sink(r, sel, out, o);
    return make_safetensors_sink(r, sel, out, o);
}

}  // namespace convert
}  // namespace ringsafe

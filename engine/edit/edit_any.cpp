// edit_file and edit_way_name (edit.hpp).
#include <cstddef>

#include "edit/edit_file.hpp"
#include "ringsafe/edit.hpp"

namespace ringsafe {

std::string_view edit_way_name(edit_way w) noexcept {
    switch (w) {
    case edit_way::unchanged: return "unchanged";
    case edit_way::in_place: return "in place";
    case edit_way::rewritten: return "rewritten";
    }
    return "";
}

edit_result edit_file(const std::string& path, std::span<const metadata_change> changes, const edit_options& opts) {
    std::byte prefix[8] = {};
    {
        const edit::target t(path);
        if (t.size() >= 4) t.read(prefix, 4, 0);
    }
    if (gguf::is_gguf(std::span<const std::byte>(prefix, 4))) return gguf::edit(path, changes, opts);
    return edit_safetensors(path, changes, opts);
}

}  // namespace ringsafe

// gguf::entry_from_text (edit.hpp): a value given as text, as the CLI's
// `--set KEY=VALUE[:TYPE]` and Python's edit() pass it.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ringsafe/edit.hpp"

namespace ringsafe::gguf {

metadata_entry entry_from_text(const std::string& key, const std::string& text, value_type t) {
    if (t == value_type::ARRAY) raise(errc::InvalidArgument, "key '" + key + "': arrays cannot be set from text");
    if (t == value_type::STRING) return metadata_entry::make(key, t, std::string_view(text));
    if (t == value_type::BOOL) {
        if (text != "true" && text != "false")
            raise(errc::InvalidArgument, "key '" + key + "': a BOOL is true or false, not '" + text + "'");
        return metadata_entry::make(key, t, text == "true");
    }
    scalar v;
    try {
        std::size_t used = 0;
        if (t == value_type::FLOAT32 || t == value_type::FLOAT64) v = std::stod(text, &used);
        else if (text.starts_with('-')) v = static_cast<std::int64_t>(std::stoll(text, &used));
        else v = static_cast<std::uint64_t>(std::stoull(text, &used));
        if (used != text.size() || text.empty()) throw std::invalid_argument("trailing text");
        if (auto* u = std::get_if<std::uint64_t>(&v); u && t != value_type::UINT8 && t != value_type::UINT16 &&
                                                      t != value_type::UINT32 && t != value_type::UINT64) {
            if (*u > static_cast<std::uint64_t>(INT64_MAX)) throw std::out_of_range("too large");
            v = static_cast<std::int64_t>(*u);
        }
    } catch (const std::logic_error&) {
        raise(errc::InvalidArgument,
              "key '" + key + "': '" + text + "' is not a " + std::string(value_type_name(t)));
    }
    try {
        return metadata_entry::make(key, t, v);
    } catch (const error& e) {
        raise(e.code(), "key '" + key + "': '" + text + "' is not a " + std::string(value_type_name(t)) + " (" +
                            e.what() + ")");
    }
}

}  // namespace ringsafe::gguf

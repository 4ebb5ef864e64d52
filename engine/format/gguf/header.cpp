// gguf::header: the magic test, lookups by name and key, the split keys.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <numeric>

#include "ringsafe/gguf.hpp"

namespace ringsafe::gguf {
namespace {

template <class Items, class Name>
void sort_indexes(std::vector<std::uint32_t>& out, const Items& items, Name name) {
    out.resize(items.size());
    std::iota(out.begin(), out.end(), std::uint32_t{0});
    std::stable_sort(out.begin(), out.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return name(items[a]) < name(items[b]); });
}

template <class Items, class Name>
const typename Items::value_type* lookup(const std::vector<std::uint32_t>& index, const Items& items,
                                         std::string_view want, Name name) noexcept {
    auto it = std::lower_bound(index.begin(), index.end(), want,
                               [&](std::uint32_t i, std::string_view n) { return name(items[i]) < n; });
    if (it == index.end() || name(items[*it]) != want) return nullptr;
    return &items[*it];
}

std::string_view tensor_name(const tensor_info& t) { return t.name; }
std::string_view entry_key(const metadata_entry& e) { return e.key; }

}  // namespace

bool is_gguf(std::span<const std::byte> prefix) noexcept {
    return prefix.size() >= magic.size() && std::memcmp(prefix.data(), magic.data(), magic.size()) == 0;
}

const tensor_info* header::find(std::string_view name) const noexcept {
    return lookup(by_name, tensors, name, tensor_name);
}

const metadata_entry* header::find_key(std::string_view key) const noexcept {
    return lookup(by_key, metadata, key, entry_key);
}

void header::build_indexes() {
    sort_indexes(by_name, tensors, tensor_name);
    sort_indexes(by_key, metadata, entry_key);
}

std::optional<split_info> header::split() const {
    if (!find_key("split.count")) return std::nullopt;
    auto key = [&](std::string_view k) -> std::uint64_t {
        const metadata_entry* e = find_key(k);
        if (!e)
            raise(errc::InvalidIndex, "a split GGUF file has split.count but no " + std::string(k));
        const std::optional<std::int64_t> v = e->as_integer();
        if (!v || *v < 0)
            raise(errc::InvalidIndex, std::string(k) + " must be a non-negative integer, not " +
                                          (e->is_array() ? std::string("an ARRAY")
                                                         : "a " + std::string(value_type_name(e->type)) +
                                                               (v ? " of " + std::to_string(*v) : "")));
        return static_cast<std::uint64_t>(*v);
    };
    split_info s;
    s.count = key("split.count");
    s.no = key("split.no");
    s.tensors_count = key("split.tensors.count");
    return s;
}

std::vector<std::uint64_t> ne_of(const tensor_info& t) {
    return {std::make_reverse_iterator(t.shape.end()), std::make_reverse_iterator(t.shape.begin())};
}

}  // namespace ringsafe::gguf

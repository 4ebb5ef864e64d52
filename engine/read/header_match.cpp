// The re-parse and record-by-record comparison of header_match.hpp.
#include "read/header_match.hpp"

#include <string_view>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::read {

bool header_matches(const reader& r, std::size_t shard, std::span<const std::byte> bytes) {
    const auto shards = r.shards();
    if (shard >= shards.size()) return false;
    const shard_info& sh = shards[shard];
    if (bytes.size() < sh.data_start || bytes.size() < 8) return false;
    try {
        parse_options o;
        o.max_header_size = UINT64_MAX >> 1;  // the reader applied its limit; this only compares
        const std::uint64_t n = parse_length_prefix(bytes.first(8), sh.size, o);
        if (8 + n != sh.data_start) return false;
        const header h = parse_header({reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n)},
                                      sh.size, o);
        if (h.tensors.size() != sh.tensor_count || h.metadata != sh.metadata) return false;
        const auto ts = r.tensors().subspan(sh.first_tensor, sh.tensor_count);
        for (std::size_t k = 0; k < ts.size(); ++k) {
            const tensor_info &a = h.tensors[k], &b = ts[k];
            if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin || a.end != b.end)
                return false;
        }
        return true;
    } catch (const error&) {
        return false;  // not a valid header any more
    }
}

}  // namespace ringsafe::read

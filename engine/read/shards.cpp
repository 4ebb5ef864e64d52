// Opening the shards of an index in parallel and checking them against its weight_map.
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "format/error_context.hpp"
#include "read/load_header.hpp"
#include "read/reader_impl.hpp"
#include "read/thread_start.hpp"

namespace ringsafe::read {
namespace {

[[noreturn]] void bad(const std::string& index_spec, const std::string& why) {
    raise(errc::InvalidIndex, "index " + index_spec + ": " + why);
}

// The __metadata__ entries that every shard holds with the same value (the
// others are dropped); nullopt when there are none. An index's own "metadata"
// (total_size) describes the index, never the checkpoint.
std::optional<metadata_map> common_metadata(const std::vector<opened_shard>& shards) {
    if (shards.empty() || !shards.front().hdr->metadata) return std::nullopt;
    metadata_map common = *shards.front().hdr->metadata;
    for (std::size_t i = 1; i < shards.size() && !common.empty(); ++i) {
        const auto& m = shards[i].hdr->metadata;
        std::erase_if(common, [&](const auto& kv) {
            if (!m) return true;
            auto it = m->find(kv.first);
            return it == m->end() || it->second != kv.second;
        });
    }
    if (common.empty()) return std::nullopt;
    return common;
}

}  // namespace

void rethrow_failed(const opened_shard& o, const std::string& context) {
    try {
        std::rethrow_exception(o.err);
    } catch (const std::system_error& e) {
        format::rethrow_with(e, "", context);
    } catch (const std::exception& e) {
        raise(errc::IoError, context + e.what());
    }
}

std::size_t parallel_opens(const reader::impl& r, const std::string& spec) noexcept {
    return is_url(spec) ? std::max<std::size_t>(r.opts.parallel_shards, 64) : r.opts.parallel_shards;
}

std::vector<opened_shard> open_all(const reader::impl& r, std::size_t n,
                                   const std::function<std::string(std::size_t)>& spec_of, std::size_t limit,
                                   std::size_t skip) {
    std::vector<opened_shard> out(n);
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < n;) {
            if (i == skip) continue;
            auto& o = out[i];
            try {
                o.spec = spec_of(i);
                o.src = r.open_source_for(o.spec);
                o.hdr = load_header(*o.src, r.opts.parse);
            } catch (...) {
                o.err = std::current_exception();
            }
        }
    };
    const std::size_t workers = std::min<std::size_t>(n, limit);
    // As many helpers as the system gives (none at all: this thread opens every shard).
    std::vector<std::thread> pool = read::start_threads(workers - 1, worker);
    worker();
    for (auto& t : pool) t.join();
    return out;
}

void open_shards(reader::impl& r, const std::string& index_spec, const shard_index& idx) {
    auto out = open_all(r, idx.shards.size(), [&](std::size_t i) { return resolve_shard(index_spec, idx.shards[i]); },
                        parallel_opens(r, index_spec));
    adopt_shards(r, index_spec, idx, std::move(out));
}

void adopt_shards(reader::impl& r, const std::string& index_spec, const shard_index& idx,
                  std::vector<opened_shard> out) {
    const std::size_t n = idx.shards.size();
    r.sharded = true;
    for (std::size_t i = 0; i < n; ++i)
        if (out[i].err) rethrow_failed(out[i], "index " + index_spec + ", shard '" + idx.shards[i] + "': ");
    for (std::size_t i = 0; i < n; ++i)
        if (out[i].hdr->format != file_format::safetensors)
            bad(index_spec, "shard '" + idx.shards[i] + "' is a GGUF file, not safetensors");

    // Every tensor in exactly one shard, the one the weight_map names.
    std::vector<std::pair<std::string_view, std::uint32_t>> found;
    for (std::uint32_t s = 0; s < n; ++s)
        for (auto& t : out[s].hdr->tensors) found.emplace_back(t.name, s);
    std::sort(found.begin(), found.end());
    for (std::size_t i = 1; i < found.size(); ++i)
        if (found[i].first == found[i - 1].first)
            bad(index_spec, "tensor '" + std::string(found[i].first) + "' is in two shards, '" +
                                idx.shards[found[i - 1].second] + "' and '" +
                                idx.shards[found[i].second] + "'");
    for (auto& [name, s] : found) {
        const std::int64_t m = idx.shard_of(name);
        if (m < 0)
            bad(index_spec, "tensor '" + std::string(name) + "' is in shard '" + idx.shards[s] +
                                "' but not in the weight_map");
        if (static_cast<std::uint32_t>(m) != s)
            bad(index_spec, "tensor '" + std::string(name) + "' is in shard '" + idx.shards[s] +
                                "' but the weight_map maps it to '" + idx.shards[m] + "'");
    }
    for (auto& [name, s] : idx.weight_map) {
        auto it = std::lower_bound(found.begin(), found.end(), std::pair<std::string_view, std::uint32_t>{name, 0});
        if (it == found.end() || it->first != name)
            bad(index_spec, "the weight_map maps tensor '" + name + "' to shard '" + idx.shards[s] +
                                "', which does not contain it");
    }
    r.metadata = common_metadata(out);
    for (auto& o : out) r.add_shard(std::move(o.spec), std::move(o.src), std::move(*o.hdr));
    r.finish();
}

}  // namespace ringsafe::read

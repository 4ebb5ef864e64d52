// The reader: opening, listing, looking up and selecting tensors.
#include "ringsafe/reader.hpp"

#include <algorithm>
#include <iterator>
#include <atomic>
#include <cstring>
#include <numeric>

#include "format/error_context.hpp"
#include "read/load_header.hpp"
#include "read/reader_impl.hpp"

namespace ringsafe {

namespace read {
std::uint64_t next_reader_id() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace read

std::unique_ptr<reader::impl> read::new_reader_state(const std::string& spec, const reader_options& opts) {
    auto p = std::make_unique<reader::impl>();
    p->id = read::next_reader_id();
    p->spec = spec;
    p->opts = opts;
    if (p->opts.parallel_shards == 0) p->opts.parallel_shards = 1;
    return p;
}

std::string read::opened_spec(const reader::impl& r, const std::string& spec, const source& src) {
    return !r.opts.open && is_url(spec) ? src.name() : spec;
}

void read::set_single_file(reader::impl& r, std::unique_ptr<source> src, shard_header h) {
    r.metadata = h.metadata;
    std::string spec = opened_spec(r, r.spec, *src);
    r.add_shard(std::move(spec), std::move(src), std::move(h));
    r.finish();
}

void read::open_file(reader::impl& r, std::unique_ptr<source> src, shard_header h) {
    const std::string spec = opened_spec(r, r.spec, *src);
    split_set set = split_parts(r, spec, *src, h);
    if (set.parts.empty()) return set_single_file(r, std::move(src), std::move(h));
    auto out = open_all(r, set.parts.size(), [&](std::size_t i) { return set.parts[i]; }, parallel_opens(r, spec),
                        set.self);
    out[set.self] = opened_shard{spec, std::move(src), std::move(h), nullptr};
    adopt_split(r, spec, std::move(out));
}

read::index_text read::begin_index_text(const source& src, std::uint64_t limit) {
    if (src.size() > limit)
        raise(errc::InvalidIndex, "index " + src.name() + " is " + std::to_string(src.size()) +
                                      " bytes, more than the limit of " + std::to_string(limit));
    index_text t;
    t.text.assign(src.size(), '\0');
    auto prefix = src.prefix();
    t.have = std::min<std::size_t>(prefix.size(), t.text.size());
    if (t.have) std::memcpy(t.text.data(), prefix.data(), t.have);
    return t;
}

std::unique_ptr<source> reader::impl::open_source_for(const std::string& s) const {
    auto src = opts.open ? opts.open(s) : open_source(s, opts.source);
    if (!src) raise(errc::InvalidArgument, "reader_options::open returned no source for " + s);
    return src;
}

void reader::impl::add_shard(std::string shard_spec, std::unique_ptr<source> src, read::shard_header h) {
    shard_info si;
    si.spec = std::move(shard_spec);
    si.size = src->size();
    si.format = h.format;
    si.data_start = h.data_start;
    si.gguf = std::move(h.gguf);
    const source_hints hints = src->hints();
    si.device = hints.device;
    si.inode = hints.inode;
    si.mtime_ns = hints.mtime_ns;
    si.file = std::string(hints.file);
    si.metadata = std::move(h.metadata);
    si.first_tensor = static_cast<std::uint32_t>(tensors.size());
    si.tensor_count = static_cast<std::uint32_t>(h.tensors.size());
    if (tensors.empty()) {
        // The first shard's table moves whole (for one file, the only copy),
        // its name index with it.
        tensors = std::move(h.tensors);
        by_name = std::move(h.by_name);
    } else {
        tensors.reserve(tensors.size() + h.tensors.size());
        std::move(h.tensors.begin(), h.tensors.end(), std::back_inserter(tensors));
        by_name.clear();
    }
    shards.push_back(std::move(si));
    auto sio = std::make_shared<shard_io>();
    sio->src = std::move(src);
    io.push_back(std::move(sio));
}

std::uint32_t reader::impl::shard_of(std::uint32_t i) const noexcept {
    if (shards.size() <= 1) return 0;
    auto it = std::upper_bound(shards.begin(), shards.end(), i,
                               [](std::uint32_t t, const shard_info& s) { return t < s.first_tensor; });
    return static_cast<std::uint32_t>(it - shards.begin()) - 1;
}

void reader::impl::finish() {
    total_bytes = 0;
    for (auto& t : tensors) total_bytes += t.size();
    if (shards.size() == 1 && by_name.size() == tensors.size()) return;  // the parser's index
    by_name.resize(tensors.size());
    std::iota(by_name.begin(), by_name.end(), 0u);
    std::sort(by_name.begin(), by_name.end(),
              [&](std::uint32_t a, std::uint32_t b) { return tensors[a].name < tensors[b].name; });
    for (std::size_t i = 1; i < by_name.size(); ++i) {
        const auto a = by_name[i - 1], b = by_name[i];
        if (tensors[a].name == tensors[b].name)
            raise(errc::InvalidIndex, "tensor '" + tensors[a].name + "' is in two shards: " +
                                          shards[shard_of(a)].spec + " and " + shards[shard_of(b)].spec);
    }
}

void reader::impl::check_selection(const selection& sel) const {
    if (sel.reader_id() != id)
        raise(errc::InvalidArgument, "the selection was made by another reader than the one for " + spec);
}

reader::reader(std::unique_ptr<impl> p) : p_(std::move(p)) {}
reader::reader(reader&&) noexcept = default;
reader& reader::operator=(reader&&) noexcept = default;
reader::~reader() = default;

reader reader::open(const std::string& spec, const reader_options& opts) {
    auto p = read::new_reader_state(spec, opts);
    auto src = p->open_source_for(spec);
    const std::string opened = read::opened_spec(*p, spec, *src);  // hf://ORG/NAME -> ...@COMMIT/FILE
    if (looks_like_index(opened, src->prefix(), src->size())) {
        read::index_text t = read::begin_index_text(*src, opts.parse.max_header_size);
        if (!t.rest().empty()) src->read_exact(t.rest_offset(), t.rest());
        src.reset();
        shard_index idx = parse_index(t.text, opened);
        read::open_shards(*p, opened, idx);
        return reader(std::move(p));
    }
    read::shard_header h = read::load_header(*src, opts.parse);
    read::open_file(*p, std::move(src), std::move(h));
    return reader(std::move(p));
}

std::optional<reader> reader::open(const std::string& spec, const reader_options& opts,
                                   status& st) noexcept {
    std::optional<reader> r;
    format::capture_status(st, spec, [&] { r.emplace(open(spec, opts)); });
    return r;
}

reader reader::from_source(std::unique_ptr<source> src, const reader_options& opts) {
    if (!src) raise(errc::InvalidArgument, "reader::from_source: no source");
    auto p = read::new_reader_state(src->name(), opts);
    read::shard_header h = read::load_header(*src, opts.parse);
    read::set_single_file(*p, std::move(src), std::move(h));
    return reader(std::move(p));
}

const std::string& reader::spec() const noexcept { return p_->spec; }
bool reader::sharded() const noexcept { return p_->sharded; }
std::span<const tensor_info> reader::tensors() const noexcept { return p_->tensors; }
std::span<const shard_info> reader::shards() const noexcept { return p_->shards; }
std::uint32_t reader::shard_of(std::uint32_t tensor) const noexcept { return p_->shard_of(tensor); }
const std::optional<metadata_map>& reader::metadata() const noexcept { return p_->metadata; }
file_format reader::format() const noexcept {
    return p_->shards.empty() ? file_format::safetensors : p_->shards.front().format;
}
const gguf::header* reader::gguf() const noexcept {
    return p_->shards.empty() ? nullptr : p_->shards.front().gguf.get();
}
std::uint64_t reader::total_bytes() const noexcept { return p_->total_bytes; }

std::optional<std::uint32_t> reader::index_of(std::string_view name) const noexcept {
    auto& bn = p_->by_name;
    auto it = std::lower_bound(bn.begin(), bn.end(), name, [&](std::uint32_t i, std::string_view n) {
        return p_->tensors[i].name < n;
    });
    if (it == bn.end() || p_->tensors[*it].name != name) return std::nullopt;
    return *it;
}

const tensor_info* reader::find(std::string_view name) const noexcept {
    auto i = index_of(name);
    return i ? &p_->tensors[*i] : nullptr;
}

const tensor_info& reader::at(std::string_view name) const {
    if (auto* t = find(name)) return *t;
    raise(errc::TensorNotFound, "tensor '" + std::string(name) + "' not found in " + p_->spec);
}

selection reader::all() const {
    std::vector<std::uint32_t> idx(p_->tensors.size());
    std::iota(idx.begin(), idx.end(), 0u);
    return selection(p_->id, std::move(idx), p_->total_bytes);
}

selection reader::select(const std::vector<std::string>& names) const {
    std::vector<std::uint32_t> idx;
    idx.reserve(names.size());
    std::vector<bool> seen(p_->tensors.size());
    std::uint64_t bytes = 0;
    for (auto& n : names) {
        auto i = index_of(n);
        if (!i) raise(errc::TensorNotFound, "tensor '" + n + "' not found in " + p_->spec);
        if (seen[*i]) raise(errc::InvalidArgument, "tensor '" + n + "' is selected twice");
        seen[*i] = true;
        idx.push_back(*i);
        bytes += p_->tensors[*i].size();
    }
    return selection(p_->id, std::move(idx), bytes);
}

selection reader::select_indices(std::span<const std::uint32_t> indices) const {
    std::vector<bool> seen(p_->tensors.size());
    std::uint64_t bytes = 0;
    for (auto i : indices) {
        if (i >= p_->tensors.size())
            raise(errc::InvalidArgument, "tensor index " + std::to_string(i) + " is out of range: " + p_->spec +
                                             " has " + std::to_string(p_->tensors.size()) + " tensors");
        if (seen[i]) raise(errc::InvalidArgument, "tensor '" + p_->tensors[i].name + "' is selected twice");
        seen[i] = true;
        bytes += p_->tensors[i].size();
    }
    return selection(p_->id, {indices.begin(), indices.end()}, bytes);
}

selection reader::select_glob(const std::vector<std::string>& patterns) const {
    return select_if([&](const tensor_info& t) {
        return std::any_of(patterns.begin(), patterns.end(),
                           [&](const std::string& p) { return glob_match(p, t.name); });
    });
}

selection reader::select_glob(std::string_view pattern) const {
    return select_if([&](const tensor_info& t) { return glob_match(pattern, t.name); });
}

selection reader::select_if(const std::function<bool(const tensor_info&)>& pred) const {
    std::vector<std::uint32_t> idx;
    std::uint64_t bytes = 0;
    for (std::uint32_t i = 0; i < p_->tensors.size(); ++i)
        if (pred(p_->tensors[i])) {
            idx.push_back(i);
            bytes += p_->tensors[i].size();
        }
    return selection(p_->id, std::move(idx), bytes);
}

}  // namespace ringsafe

// The safetensors and GGUF destinations of `ringsafe cp` (cp_sink.hpp).
#include "cp_sink.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gguf_listing.hpp"
#include "json_text.hpp"
#include "ringsafe/dequantize.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "ringsafe/writer.hpp"

namespace ringsafe::cli {
namespace {

// Keys that describe a source's layout, not the model: a split set's keys
// (the output is one file) and the streaming writer's padding.
bool layout_key(std::string_view key) { return key.starts_with("split.") || key == gguf::padding_key; }

// Whole blocks dequantized per step: the scratch stays small whatever the tensor.
constexpr std::uint64_t dequant_step = 1u << 20;

// A safetensors file, or a sharded checkpoint of them with its index; GGUF
// block tensors are dequantized as their bytes arrive.
class safetensors_sink final : public cp_sink {
public:
    safetensors_sink(const reader& r, const selection& sel, const std::string& out, const sink_options& o)
        : to_(o.dequantize_to), out_(out), opts_(o) {
        auto tensors = r.tensors();
        std::uint64_t total = 0;
        for (auto i : sel.indices()) {
            const tensor_info& t = tensors[i];
            std::uint64_t bytes = t.size();
            dtype dt = t.dtype;
            if (t.quantized()) {
                if (!can_dequantize(t.ggml))
                    raise(errc::InvalidArgument, "tensor '" + t.name + "' of " + r.spec() + " is of GGUF type " +
                                                     std::string(ggml_type_name(t.ggml)) +
                                                     ", which cannot be dequantized (select other tensors)");
                dt = to_;
                bytes = *dtype_bytes_for(to_, t.elements());
            }
            entries_.push_back({t.name, dt, t.shape, total, total + bytes});
            total += bytes;
        }
        // Shards as transformers cuts them: a new one before a tensor that would take it past the limit.
        starts_ = {0};
        std::uint64_t in_shard = 0;
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            const std::uint64_t n = entries_[i].end - entries_[i].begin;
            if (o.max_shard_bytes && in_shard && in_shard + n > o.max_shard_bytes) {
                starts_.push_back(i);
                in_shard = 0;
            }
            in_shard += n;
        }
        sharded_ = o.max_shard_bytes != 0;
        if (const gguf::header* h = r.gguf()) {
            metadata_map m;
            for (const gguf::metadata_entry& e : h->metadata)
                if (!layout_key(e.key)) m["gguf." + e.key] = metadata_value_json(e);
            meta_ = std::move(m);
        } else {
            meta_ = r.metadata();
        }
        open_shard(0);
    }

    void begin(const tensor_info& t) override {
        if (shard_ + 1 < starts_.size() && next_ == starts_[shard_ + 1]) {
            w_->finish(meta_ ? &*meta_ : nullptr);
            open_shard(shard_ + 1);
        }
        ++next_;
        quantized_ = t.quantized();
        type_ = t.ggml;
        block_ = ggml_traits(t.ggml).type_size;
        carry_.clear();
        w_->begin(t.name, quantized_ ? to_ : t.dtype, t.shape);
    }
    void append(std::span<const std::byte> bytes, std::shared_ptr<const void> hold) override {
        if (!quantized_) return w_->append(bytes, std::move(hold));
        if (!carry_.empty()) {  // complete the block cut by the last piece
            const std::size_t n = std::min<std::size_t>(block_ - carry_.size(), bytes.size());
            carry_.insert(carry_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
            bytes = bytes.subspan(n);
            if (carry_.size() < block_) return;
            put_blocks(carry_);
            carry_.clear();
        }
        const std::size_t step = static_cast<std::size_t>(std::max<std::uint64_t>(dequant_step / block_, 1) * block_);
        while (bytes.size() >= block_) {
            const std::size_t n = std::min(step, bytes.size() / block_ * block_);
            put_blocks(bytes.first(n));
            bytes = bytes.subspan(n);
        }
        carry_.assign(bytes.begin(), bytes.end());
    }
    void end() override { w_->end(); }  // a partial block left is WriterState: its elements are missing
    unsigned writes_in_flight() const noexcept override { return w_->writes_in_flight(); }
    void wait_write() override { w_->wait_write(); }
    void finish() override {
        w_->finish(meta_ ? &*meta_ : nullptr);
        if (sharded_) write_index();
    }
    void abandon() noexcept override { w_->abandon(); }

private:
    // Shard i's name: OUT's stem-00001-of-00003.safetensors (OUT ends in .safetensors, or gets it).
    std::string shard_name(std::size_t i) const {
        std::string stem = out_;
        if (stem.ends_with(".safetensors")) stem.resize(stem.size() - 12);
        char tail[48];
        std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.safetensors", i + 1, starts_.size());
        return stem + tail;
    }
    void open_shard(std::size_t i) {
        shard_ = i;
        const std::size_t end = i + 1 < starts_.size() ? starts_[i + 1] : entries_.size();
        std::vector<tensor_entry> mine(entries_.begin() + static_cast<std::ptrdiff_t>(starts_[i]),
                                       entries_.begin() + static_cast<std::ptrdiff_t>(end));
        const std::uint64_t base = mine.empty() ? 0 : mine.front().begin;
        for (auto& e : mine) e.begin -= base, e.end -= base;
        writer_options wo;
        wo.reserve_bytes = serialized_json_size(mine, meta_ ? &*meta_ : nullptr);  // exact: nothing relocates
        wo.direct = opts_.direct;
        wo.sync = wo.sync_dir = opts_.sync;
        w_.emplace(sharded_ ? shard_name(i) : out_, wo);
    }
    // OUT's stem + .safetensors.index.json, as transformers writes it, published by rename.
    void write_index() const {
        std::string stem = out_;
        if (stem.ends_with(".safetensors")) stem.resize(stem.size() - 12);
        std::string j = "{\"metadata\": {\"total_size\": " +
                        std::to_string(entries_.empty() ? 0 : entries_.back().end) + "}, \"weight_map\": {";
        for (std::size_t s = 0, i = 0; s < starts_.size(); ++s) {
            const std::string file = std::filesystem::path(shard_name(s)).filename().string();
            for (const std::size_t end = s + 1 < starts_.size() ? starts_[s + 1] : entries_.size(); i < end; ++i) {
                if (i) j += ", ";
                append_json_string(j, entries_[i].name);
                j += ": ";
                append_json_string(j, file);
            }
        }
        j += "}}\n";
        const std::string index = stem + ".safetensors.index.json", tmp = index + ".ringsafe-tmp";
        {
            std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
            f << j;
            if (!f.flush()) raise(errc::IoError, "writing '" + tmp + "'");
        }
        std::filesystem::rename(tmp, index);
    }

    void put_blocks(std::span<const std::byte> blocks) {
        const std::uint64_t n = *dtype_bytes_for(to_, dequantized_elements(type_, blocks.size()).value());
        scratch_.resize(n);
        dequantize(type_, blocks, to_, scratch_, 0);
        w_->append(scratch_);
    }

    dtype to_;
    std::string out_;
    sink_options opts_;
    std::vector<tensor_entry> entries_;
    std::vector<std::size_t> starts_;  // each shard's first tensor
    bool sharded_ = false;
    std::size_t next_ = 0, shard_ = 0;
    std::optional<metadata_map> meta_;
    std::optional<writer> w_;
    bool quantized_ = false;
    ggml_type type_ = ggml_type::none;
    std::size_t block_ = 0;
    std::vector<std::byte> carry_, scratch_;
};

// A GGUF file, streamed, or a split set of them: safetensors tensors as the
// GGUF type of their dtype, GGUF tensors as they are (block types too).
class gguf_sink final : public cp_sink {
public:
    gguf_sink(const reader& r, const selection& sel, const std::string& out, const sink_options& o)
        : out_(out), opts_(o) {
        auto tensors = r.tensors();
        for (auto i : sel.indices()) records_.push_back(record_of(r, tensors[i]));
        if (const gguf::header* h = r.gguf()) {
            alignment_ = h->alignment;
            for (const gguf::metadata_entry& e : h->metadata)
                if (!layout_key(e.key)) meta_.push_back(e);
        } else if (r.metadata()) {
            for (const auto& [k, v] : *r.metadata())
                meta_.push_back(gguf::metadata_entry::make(k, gguf::value_type::STRING, std::string_view(v)));
        }
        plan_parts();
        open_part(0);
    }

    void begin(const tensor_info&) override {
        if (part_ + 1 < starts_.size() && next_ == starts_[part_ + 1]) {
            w_->finish();
            open_part(part_ + 1);
        }
        w_->begin(records_.at(next_++));
    }
    void append(std::span<const std::byte> bytes, std::shared_ptr<const void>) override { w_->append(bytes); }
    void end() override { w_->end(); }
    unsigned writes_in_flight() const noexcept override { return 0; }  // appends copy: no hold outlives them
    void wait_write() override {}
    void finish() override {
        while (part_ + 1 < starts_.size()) {  // parts left without tensors (none: a plan never makes one)
            w_->finish();
            open_part(part_ + 1);
        }
        w_->finish();
    }
    void abandon() noexcept override { w_->abandon(); }

private:
    static gguf::tensor_record record_of(const reader& r, const tensor_info& t) {
        gguf::tensor_record rec{t.name, t.ggml, {}};
        if (t.ggml != ggml_type::none) {
            rec.ne = gguf::ne_of(t);
        } else {
            auto g = ggml_type_for(t.dtype);
            if (!g)
                raise(errc::InvalidArgument, "tensor '" + t.name + "' of " + r.spec() + " is of dtype " +
                                                 std::string(dtype_name(t.dtype)) +
                                                 ", which GGUF has no type for (F32, F16, BF16, F64, I8..I64)");
            if (t.shape.size() > gguf::max_dims)
                raise(errc::InvalidArgument, "tensor '" + t.name + "' of " + r.spec() + " has " +
                                                 std::to_string(t.shape.size()) + " dimensions; GGUF holds at most " +
                                                 std::to_string(gguf::max_dims));
            if (t.name.size() > gguf::max_name_length)
                raise(errc::InvalidArgument, "tensor '" + t.name + "' of " + r.spec() + ": its name is " +
                                                 std::to_string(t.name.size()) + " bytes, over ggml's " +
                                                 std::to_string(gguf::max_name_length) + "-byte limit");
            rec.type = *g;
            rec.ne.assign(t.shape.begin(), t.shape.end());
            std::reverse(rec.ne.begin(), rec.ne.end());
        }
        gguf::tensor_bytes(rec);  // what ggml's reader would refuse, named
        return rec;
    }
    // The index of each part's first tensor.
    void plan_parts() {
        starts_ = {0};
        std::uint64_t bytes = 0, count = 0;
        for (std::size_t i = 0; i < records_.size(); ++i) {
            const std::uint64_t n = gguf::tensor_bytes(records_[i]);
            const bool full = (opts_.split_max_tensors && count == opts_.split_max_tensors) ||
                              (opts_.split_max_bytes && count && bytes + n > opts_.split_max_bytes);
            if (full) {
                starts_.push_back(i);
                bytes = count = 0;
            }
            bytes += n;
            ++count;
        }
        split_ = opts_.split_max_bytes || opts_.split_max_tensors;
    }
    void open_part(std::size_t part) {
        part_ = part;
        std::vector<gguf::metadata_entry> md;
        if (part == 0) md = meta_;
        if (split_) {
            using gguf::value_type;
            md.push_back(gguf::metadata_entry::make("split.no", value_type::UINT16, std::uint64_t{part}));
            md.push_back(gguf::metadata_entry::make("split.count", value_type::UINT16, std::uint64_t{starts_.size()}));
            md.push_back(gguf::metadata_entry::make("split.tensors.count", value_type::INT32,
                                                    static_cast<std::int64_t>(records_.size())));
        }
        const std::size_t end = part + 1 < starts_.size() ? starts_[part + 1] : records_.size();
        gguf::writer_options wo;
        wo.alignment = alignment_;
        // The exact header size is known: reserve it, nothing ever relocates.
        wo.reserve_bytes = gguf::serialized_size(md, std::span(records_).subspan(starts_[part], end - starts_[part]),
                                                 alignment_) +
                           64 + gguf::padding_key.size();
        wo.direct = opts_.direct;
        wo.sync = wo.sync_dir = opts_.sync;
        const std::string path = split_ ? split_part_name(out_, part, starts_.size()) : out_;
        w_.emplace(path, std::move(md), wo);
    }

    std::string out_;
    sink_options opts_;
    std::uint32_t alignment_ = gguf::default_alignment;
    std::vector<gguf::metadata_entry> meta_;
    std::vector<gguf::tensor_record> records_;
    std::vector<std::size_t> starts_;
    bool split_ = false;
    std::size_t next_ = 0, part_ = 0;
    std::optional<gguf::writer> w_;
};

}  // namespace

bool gguf_target(const std::string& out) {
    if (out.size() < 5) return false;
    std::string ext = out.substr(out.size() - 5);
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".gguf";
}

std::string split_part_name(const std::string& out, std::size_t no, std::size_t count) {
    char tail[40];
    std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.gguf", no + 1, count);
    return out.substr(0, out.size() - 5) + tail;  // OUT ends in .gguf (gguf_target)
}

std::unique_ptr<cp_sink> make_sink(const reader& r, const selection& sel, const std::string& out,
                                   const sink_options& o) {
    if (gguf_target(out)) return std::make_unique<gguf_sink>(r, sel, out, o);
    return std::make_unique<safetensors_sink>(r, sel, out, o);
}

}  // namespace ringsafe::cli

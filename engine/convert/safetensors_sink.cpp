// A safetensors target: one file, or a sharded checkpoint with its index;
// GGUF block tensors dequantized as their bytes arrive (sink.hpp).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "convert/metadata_json.hpp"
#include "convert/sink.hpp"
#include "ringsafe/dequantize.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "ringsafe/writer.hpp"

namespace ringsafe::convert {
namespace {

// Whole blocks dequantized per step: the scratch stays small whatever the tensor.
constexpr std::uint64_t dequant_step = 1u << 20;

// A safetensors file, or a sharded checkpoint of them with its index; GGUF
// block tensors are dequantized as their bytes arrive.
class safetensors_sink final : public sink {
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
            files_.push_back(path_);
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
        files_.push_back(path_);
        if (sharded_) files_.push_back(write_index());
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
        path_ = sharded_ ? shard_name(i) : out_;
        w_.emplace(path_, wo);
    }
    // OUT's stem + .safetensors.index.json, as transformers writes it, published by rename; its path.
    std::string write_index() const {
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
        return index;
    }

    void put_blocks(std::span<const std::byte> blocks) {
        const std::uint64_t n = *dtype_bytes_for(to_, dequantized_elements(type_, blocks.size()).value());
        scratch_.resize(n);
        dequantize(type_, blocks, to_, scratch_, 0);
        w_->append(scratch_);
    }

    dtype to_;
    std::string out_, path_;  // the target; the file being written
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

}  // namespace

std::unique_ptr<sink> make_safetensors_sink(const reader& r, const selection& sel, const std::string& out,
                                            const sink_options& o) {
    return std::make_unique<safetensors_sink>(r, sel, out, o);
}

}  // namespace ringsafe::convert

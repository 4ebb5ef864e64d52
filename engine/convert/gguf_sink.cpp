// A GGUF target: one file, streamed, or a split set named and keyed as
// llama.cpp's gguf-split does (sink.hpp).
#include <algorithm>
#include <optional>
#include <vector>

#include "convert/sink.hpp"
#include "ringsafe/convert.hpp"
#include "ringsafe/gguf_writer.hpp"

namespace ringsafe::convert {
namespace {

// A GGUF file, streamed, or a split set of them: safetensors tensors as the
// GGUF type of their dtype, GGUF tensors as they are (block types too).
class gguf_sink final : public sink {
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
            files_.push_back(path_);
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
            files_.push_back(path_);
            open_part(part_ + 1);
        }
        w_->finish();
        files_.push_back(path_);
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
        path_ = split_ ? split_part_name(out_, part, starts_.size()) : out_;
        w_.emplace(path_, std::move(md), wo);
    }

    std::string out_, path_;  // the target; the file being written
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

std::unique_ptr<sink> make_gguf_sink(const reader& r, const selection& sel, const std::string& out,
                                     const sink_options& o) {
    return std::make_unique<gguf_sink>(r, sel, out, o);
}

}  // namespace ringsafe::convert

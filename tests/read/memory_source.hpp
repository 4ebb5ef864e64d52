// An in-memory ringsafe::source for planner and reader tests (leveldb's
// StringSource idea): execute() copies with memcpy, honouring each op, the
// io_control callbacks and cancellation, and records what it was asked to do.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ringsafe/source.hpp"

namespace ringsafe::test {

class memory_source : public source {
public:
    memory_source(std::string name, std::vector<std::byte> bytes, std::size_t prefetch = 256u << 10)
        : name_(std::move(name)), bytes_(std::move(bytes)) {
        prefix_.assign(bytes_.begin(), bytes_.begin() + std::min(prefetch, bytes_.size()));
        size_ = bytes_.size();
    }

    const std::string& name() const noexcept override { return name_; }
    std::uint64_t size() const noexcept override { return size_; }
    std::span<const std::byte> prefix() const noexcept override { return prefix_; }

    void read_exact(std::uint64_t offset, std::span<std::byte> dst) override {
        ++read_exact_calls;
        if (offset + dst.size() > bytes_.size())
            raise(errc::Truncated, name_ + ": ends at " + std::to_string(bytes_.size()));
        std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
    }

    void execute(std::span<const read_op> ops, const io_control& ctl) override {
        if (on_execute) on_execute();
        {
            std::lock_guard lk(m_);
            executed.emplace_back(ops.begin(), ops.end());
        }
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const read_op& op = ops[i];
            for (std::uint64_t done = 0; done < op.length;) {
                if (ctl.cancel && ctl.cancel->load()) raise(errc::Cancelled, name_ + ": cancelled");
                const std::uint64_t pos = op.offset + done;
                const std::uint64_t n = std::min<std::uint64_t>(piece, op.length - done);
                std::string what = ctl.describe ? ctl.describe(op.tag) : "op";
                if (fail_at && pos <= *fail_at && *fail_at < pos + n)
                    raise(errc::IoError, name_ + ": injected failure at offset " +
                                             std::to_string(*fail_at) + " reading " + what);
                if (pos + n > bytes_.size())
                    raise(errc::Truncated, name_ + ": ends at " + std::to_string(bytes_.size()) +
                                               " reading " + what);
                std::memcpy(op.dst + done, bytes_.data() + pos, n);
                if (ctl.on_bytes) ctl.on_bytes(i, n);
                done += n;
            }
        }
    }

    source_hints hints() const noexcept override { return hints_; }

    // Shrinks the object after open (size() still reports the size at open).
    void truncate(std::size_t n) { bytes_.resize(n); }

    source_hints hints_{};
    std::uint64_t piece = 1u << 20;        // bytes per on_bytes call
    std::optional<std::uint64_t> fail_at;  // absolute offset whose read fails with IoError
    std::function<void()> on_execute;      // runs at the start of every execute()
    std::atomic<int> read_exact_calls{0};
    std::vector<std::vector<read_op>> executed;  // every execute()'s ops

private:
    std::string name_;
    std::vector<std::byte> bytes_, prefix_;
    std::uint64_t size_ = 0;
    std::mutex m_;
};

// A set of named in-memory objects; opener() hands out memory_sources for them
// (as reader_options::open) and remembers the last one made for each name.
struct memory_store {
    std::map<std::string, std::vector<std::byte>> objects;
    std::map<std::string, memory_source*> opened;
    std::size_t prefetch = 256u << 10;
    std::function<void(memory_source&)> configure;  // applied to each new source
    std::function<void(const std::string&)> on_open;  // runs before each open (any thread)
    std::mutex m;

    std::function<std::unique_ptr<source>(const std::string&)> opener() {
        return [this](const std::string& spec) -> std::unique_ptr<source> {
            if (on_open) on_open(spec);
            std::lock_guard lk(m);
            auto it = objects.find(spec);
            if (it == objects.end()) raise_errno(ENOENT, "open " + spec);
            auto src = std::make_unique<memory_source>(spec, it->second, prefetch);
            if (configure) configure(*src);
            opened[spec] = src.get();
            return src;
        };
    }
};

}  // namespace ringsafe::test

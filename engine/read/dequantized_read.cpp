#include "read/dequantized_read.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ringsafe/dequantize.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/ggml_type.hpp"

namespace ringsafe::read {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t staging_align = 64;

struct free_deleter {
    void operator()(std::byte* p) const noexcept { std::free(p); }
};

std::uint64_t round_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

// The targets of one plan, and the bytes of staging their raw blocks need.
struct batch {
    std::vector<std::size_t> items;        // indices into the targets
    std::vector<std::uint64_t> offsets;    // each item's place in staging (dequantized items)
    std::uint64_t staging_size = 0;
};

// A staging buffer, kept from batch to batch (its pages faulted in once).
struct staging {
    std::unique_ptr<std::byte, free_deleter> bytes;
    std::uint64_t capacity = 0;

    std::byte* at_least(std::uint64_t n) {
        if (n <= capacity) return bytes.get();
        n = round_up(n, 4096);
        bytes.reset();
        capacity = 0;
        bytes.reset(static_cast<std::byte*>(std::aligned_alloc(4096, n)));
        if (!bytes) throw std::bad_alloc();
        capacity = n;
        return bytes.get();
    }
};

std::string described(const tensor_info& t) {
    return "tensor '" + t.name + "' (" + std::string(ggml_type_name(t.ggml)) + ")";
}

// Every check a target gets before any I/O (the plan checks a raw target's size).
void check(const tensor_info& t, const dequantized_target& d) {
    if (!d.out) return;
    if (t.ggml == ggml_type::none)
        raise(errc::InvalidArgument, "tensor '" + t.name + "' is not a GGUF tensor: it has no ggml type to dequantize");
    if (*d.out != dtype::F32 && *d.out != dtype::F16 && *d.out != dtype::BF16)
        raise(errc::InvalidArgument, described(t) + ": values are dequantized to F32, F16 or BF16, not " +
                                         std::string(dtype_name(*d.out)));
    if (!can_dequantize(t.ggml)) raise(errc::InvalidArgument, described(t) + ": ringsafe cannot dequantize this type");
    const auto n = dequantized_elements(t.ggml, t.size());
    if (!n) raise(errc::InvalidArgument, described(t) + ": " + std::to_string(t.size()) + " bytes are not whole blocks");
    const std::uint64_t need = *n * (*d.out == dtype::F32 ? 4 : 2);
    if (d.dst.size() < need)
        raise(errc::BufferTooSmall, described(t) + ": its values need " + std::to_string(need) +
                                        " bytes, the destination has " + std::to_string(d.dst.size()));
}

std::vector<batch> cut(const reader& r, std::span<const dequantized_target> targets, std::uint64_t limit) {
    std::vector<batch> out(1);
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const auto& d = targets[i];
        const std::uint64_t need = d.out ? round_up(r.tensors()[d.tensor].size(), staging_align) : 0;
        if (need && out.back().staging_size && out.back().staging_size + need > limit) out.emplace_back();
        batch& b = out.back();
        b.items.push_back(i);
        b.offsets.push_back(b.staging_size);
        b.staging_size += need;
    }
    return out;
}

// Waits for a queue's jobs, watching `cancel`: when it is set, drops what has
// not started, waits for the rest and throws Cancelled.
void drain(dequantize_queue& q, const std::atomic<bool>* cancel) {
    while (!q.wait_for(50ms)) {
        if (cancel && cancel->load()) {
            q.cancel();
            q.wait();
            raise(errc::Cancelled, "cancelled while dequantizing");
        }
    }
}

}  // namespace

void read_dequantized(reader& r, std::span<const dequantized_target> targets, const dequantized_read_options& o,
                      const read_control& ctl) {
    const auto tensors = r.tensors();
    std::uint64_t total = 0;
    {
        std::vector<bool> seen(tensors.size());
        for (const auto& d : targets) {
            if (d.tensor >= tensors.size())
                raise(errc::InvalidArgument, "tensor index " + std::to_string(d.tensor) + " out of range");
            if (seen[d.tensor]) raise(errc::InvalidArgument, "tensor '" + tensors[d.tensor].name + "' given twice");
            seen[d.tensor] = true;
            check(tensors[d.tensor], d);
            total += tensors[d.tensor].size();
        }
    }
    std::vector<batch> batches = cut(r, targets, o.staging_bytes);

    // A submit refused (out of memory) is rethrown once the reads are done.
    std::mutex failed_m;
    std::exception_ptr failed;
    // Batch k reads into stage[k % 2] and is dequantized by queues[k % 2]. The
    // queues are declared after the staging: destroyed first, so that no job
    // runs on a staging buffer or destination once this function has left.
    staging stage[2];
    dequantize_queue q0(o.threads), q1(o.threads);
    dequantize_queue* queues[2] = {&q0, &q1};
    std::uint64_t landed = 0;

    for (std::size_t k = 0; k < batches.size(); ++k) {
        dequantize_queue& q = *queues[k % 2];
        drain(q, ctl.cancel);  // batch k - 2's jobs, which used this staging
        batch& b = batches[k];
        std::byte* const base = b.staging_size ? stage[k % 2].at_least(b.staging_size) : nullptr;
        std::vector<std::uint32_t> indices;
        std::vector<std::span<std::byte>> spans;
        for (std::size_t j = 0; j < b.items.size(); ++j) {
            const auto& d = targets[b.items[j]];
            indices.push_back(d.tensor);
            spans.push_back(d.out ? std::span(base + b.offsets[j], tensors[d.tensor].size()) : d.dst);
        }
        const read_plan plan = r.plan(r.select_indices(indices), spans);

        read_control c;
        c.cancel = ctl.cancel;
        if (ctl.on_progress)
            c.on_progress = [&ctl, landed, total](std::uint64_t done, std::uint64_t) {
                ctl.on_progress(landed + done, total);
            };
        c.on_tensor_done = [&](std::size_t target, const tensor_info& t) {
            const auto& d = targets[b.items[target]];
            if (!d.out) return;
            status st;
            if (!q.submit({t.ggml, spans[target], *d.out, d.dst, t.name, {}}, st)) {
                std::lock_guard lk(failed_m);
                if (!failed) failed = std::make_exception_ptr(error(st.code, st.message));
            }
        };
        r.execute(plan, c);
        landed += plan.total_bytes();
        std::lock_guard lk(failed_m);
        if (failed) std::rethrow_exception(failed);
    }
    drain(q0, ctl.cancel);
    drain(q1, ctl.cancel);
}

}  // namespace ringsafe::read

// read_to_device() and device_stager: check the call, pick the copier (CUDA
// or the host stand-in), keep it and its staging ring, run the pipeline.
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "format/error_context.hpp"

#include "device/cuda_runtime.hpp"
#include "device/host_copier.hpp"
#include "device/staged_read.hpp"

namespace ringsafe {

struct device_stager::impl {
    device_options opts;
    device::stand_in_hooks hooks;  // tests only (device::stand_in_stager)
    mutable std::mutex m;
    // Declared before the copier, so freed after it: the copier's destructor
    // still finishes queued copies, which read this memory.
    std::vector<device::staging_block> memory;
    std::unique_ptr<device::copier> copier;

    device::copier& get() {
        if (!copier) {
            if (opts.stand_in)
                copier = std::make_unique<device::host_copier>(opts.staging_count, hooks);
            else
                copier = device::make_cuda_copier(opts.device, opts.staging_count);
        }
        return *copier;
    }
    void drop() noexcept {
        copier.reset();  // first: it finishes what it queued
        memory.clear();
    }
};

device_stager::device_stager(const device_options& opts) : impl_(std::make_unique<impl>()) {
    device::check_options(opts);
    impl_->opts = opts;
}

device_stager::~device_stager() = default;
device_stager::device_stager(device_stager&&) noexcept = default;
device_stager& device_stager::operator=(device_stager&&) noexcept = default;

device_read_stats device_stager::read(reader& r, const selection& sel, std::span<const device_span> dsts,
                                      const read_control& ctl, void* stream) {
    if (!impl_) raise(errc::InvalidArgument, "device_stager: used after a move");
    std::lock_guard lk(impl_->m);
    device::check_targets(r, sel, dsts, impl_->opts);  // before loading anything
    try {
        device_options o = impl_->opts;
        o.stream = stream;
        return device::staged_read(r, sel, dsts, o, ctl, impl_->get(), impl_->memory);
    } catch (...) {
        // Any failure: a copy error may leave a CUDA stream unusable, so the
        // next read starts from a new copier and ring (every copy was waited for).
        impl_->drop();
        throw;
    }
}

std::size_t device_stager::staging_buffers() const {
    if (!impl_) return 0;
    std::lock_guard lk(impl_->m);
    std::size_t n = 0;
    for (const auto& b : impl_->memory) n += b.data() != nullptr;
    return n;
}

void device_stager::release() {
    if (!impl_) return;
    std::lock_guard lk(impl_->m);
    impl_->drop();
}

const device_options& device_stager::options() const noexcept {
    static const device_options none;
    return impl_ ? impl_->opts : none;
}

// What engine/device gives its tests of a stager: the stand-in's hooks.
struct device_stager_access {
    static void set_hooks(device_stager& s, device::stand_in_hooks hooks) { s.impl_->hooks = std::move(hooks); }
};

device_stager device::stand_in_stager(const device_options& opts, stand_in_hooks hooks) {
    if (!opts.stand_in) raise(errc::InvalidArgument, "read_to_device: the stand-in's test hooks need stand_in");
    device_stager s(opts);
    device_stager_access::set_hooks(s, std::move(hooks));
    return s;
}

device_read_stats device::read_with_stand_in_hooks(reader& r, const selection& sel,
                                                   std::span<const device_span> dsts, const device_options& opts,
                                                   const read_control& ctl, stand_in_hooks hooks) {
    device_stager s = stand_in_stager(opts, std::move(hooks));
    return s.read(r, sel, dsts, ctl, opts.stream);
}

device_read_stats read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                                 const device_options& opts, const read_control& ctl) {
    device_stager s(opts);  // checks the options; read() checks the targets before any CUDA
    return s.read(r, sel, dsts, ctl, opts.stream);
}

bool read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                    const device_options& opts, const read_control& ctl, status& st) noexcept {
    return format::capture_status(st, {}, [&] { read_to_device(r, sel, dsts, opts, ctl); });
}

bool cuda_runtime_available(std::string* why) noexcept {
    try {
        (void)device::cuda_runtime();
        return true;
    } catch (const std::exception& e) {
        if (why) *why = e.what();
    }
    return false;
}

}  // namespace ringsafe

// The CUDA copier: pinned staging buffers, one non-blocking stream, one event
// per staging slot recorded after the slot's copies; waiting on the event
// recycles the slot. Two more events order the copier's stream against the
// caller's (after_stream, before_stream). Never run on a GPU yet (see the
// README, "GPU destinations"): written from the CUDA Runtime API reference.
#include <string>
#include <utility>
#include <vector>

#include "device/copier.hpp"
#include "device/cuda_runtime.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::device {
namespace {

// Makes `index` the calling thread's device for one call and restores the previous one.
class device_scope {
public:
    device_scope(const cuda_api& api, int index) : api_(api) {
        if (api_.get_device(&previous_) != cuda_success) previous_ = -1;
        if (cuda_error e = api_.set_device(index); e != cuda_success)
            raise(errc::IoError, "GPU destination: " + cuda_error_text(api_, "cudaSetDevice", e) + " for device " +
                                     std::to_string(index));
    }
    ~device_scope() {
        if (previous_ >= 0) api_.set_device(previous_);
    }
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;

private:
    const cuda_api& api_;
    int previous_ = -1;
};


class cuda_copier final : public copier {
public:
    cuda_copier(const cuda_api& api, int index, std::size_t slots)
        : api_(api), index_(index), events_(slots, nullptr), pending_(slots) {
        device_scope on(api_, index_);
        try {
            check(api_.stream_create_with_flags(&stream_, cuda_stream_non_blocking), "cudaStreamCreateWithFlags");
            for (auto& ev : events_)
                check(api_.event_create_with_flags(&ev, cuda_event_disable_timing), "cudaEventCreateWithFlags");
            check(api_.event_create_with_flags(&caller_ready_, cuda_event_disable_timing), "cudaEventCreateWithFlags");
            check(api_.event_create_with_flags(&copies_done_, cuda_event_disable_timing), "cudaEventCreateWithFlags");
        } catch (...) {
            release();
            throw;
        }
    }
    ~cuda_copier() override { release(); }

    staging_block allocate_staging(std::size_t size) override {
        device_scope on(api_, index_);
        void* p = nullptr;
        check(api_.host_alloc(&p, size, cuda_host_alloc_default), "cudaHostAlloc of a staging buffer");
        const cuda_api* api = &api_;
        return staging_block(static_cast<std::byte*>(p), size, [api](std::byte* q) { api->free_host(q); });
    }

    bool needs_staging(const void* dst) override {
        cuda_pointer_attributes attr;
        if (api_.pointer_get_attributes(&attr, dst) != cuda_success) {
            api_.get_last_error();  // older runtimes fail for unregistered host memory: clear it
            return false;
        }
        return attr.type == cuda_memory_device || attr.type == cuda_memory_managed;
    }

    void submit(std::size_t slot, std::vector<copy_piece> pieces) override {
        device_scope on(api_, index_);
        pending_.at(slot) = pieces;
        for (const copy_piece& p : pieces)
            if (cuda_error e = api_.memcpy_async(p.dst, p.src, p.size, cuda_memcpy_host_to_device, stream_);
                e != cuda_success) {
                api_.event_record(events_.at(slot), stream_);  // wait() then covers the copies already queued
                raise(errc::IoError, "copying " + describe_piece(p) + " to " + describe() + ": " +
                                         cuda_error_text(api_, "cudaMemcpyAsync", e));
            }
        check(api_.event_record(events_.at(slot), stream_), "cudaEventRecord");
    }

    void wait(std::size_t slot) override {
        std::vector<copy_piece> pieces = std::move(pending_.at(slot));
        pending_.at(slot).clear();
        if (pieces.empty()) return;
        if (cuda_error e = api_.event_synchronize(events_.at(slot)); e != cuda_success) {
            // An asynchronous failure is reported for the stream, not a copy: name the slot's tensors.
            std::string names;
            for (const copy_piece& p : pieces) {
                if (names.size() > 200) {
                    names += ", ...";
                    break;
                }
                names += (names.empty() ? "" : ", ") + describe_piece(p);
            }
            raise(errc::IoError, "copying " + names + " to " + describe() + ": " +
                                     cuda_error_text(api_, "cudaEventSynchronize", e));
        }
    }

    void after_stream(void* stream) override {
        device_scope on(api_, index_);
        // cudaEventRecord captures the work queued on the caller's stream so far;
        // cudaStreamWaitEvent makes every later copy on ours wait for it.
        check(api_.event_record(caller_ready_, static_cast<cuda_stream>(stream)), "cudaEventRecord on the caller's stream");
        check(api_.stream_wait_event(stream_, caller_ready_, 0), "cudaStreamWaitEvent");
    }

    void before_stream(void* stream) override {
        device_scope on(api_, index_);
        check(api_.event_record(copies_done_, stream_), "cudaEventRecord");
        check(api_.stream_wait_event(static_cast<cuda_stream>(stream), copies_done_, 0),
              "cudaStreamWaitEvent on the caller's stream");
    }

    std::string describe() const override { return "CUDA device " + std::to_string(index_); }

private:
    void release() noexcept {
        // Queued copies finish before the stream goes: the staging memory they
        // read is freed after the copier.
        if (stream_) api_.stream_synchronize(stream_);
        for (auto& ev : events_)
            if (ev) api_.event_destroy(std::exchange(ev, nullptr));
        if (caller_ready_) api_.event_destroy(std::exchange(caller_ready_, nullptr));
        if (copies_done_) api_.event_destroy(std::exchange(copies_done_, nullptr));
        if (stream_) api_.stream_destroy(std::exchange(stream_, nullptr));
    }
    void check(cuda_error e, const char* what) {
        if (e != cuda_success) raise(errc::IoError, "GPU destination on " + describe() + ": " + cuda_error_text(api_, what, e));
    }

    const cuda_api& api_;
    int index_;
    cuda_stream stream_ = nullptr;
    std::vector<cuda_event> events_;
    cuda_event caller_ready_ = nullptr;  // recorded on the caller's stream (after_stream)
    cuda_event copies_done_ = nullptr;   // recorded on ours after the last copy (before_stream)
    std::vector<std::vector<copy_piece>> pending_;  // per slot: what its event covers
};

}  // namespace

std::unique_ptr<copier> make_cuda_copier(int index, std::size_t slots) {
    const cuda_api& api = cuda_runtime();
    return std::make_unique<cuda_copier>(api, index, slots);
}

}  // namespace ringsafe::device

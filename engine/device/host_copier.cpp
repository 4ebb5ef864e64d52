// The host stand-in copier: one thread, a queue of slots, memcpy per piece.
#include "device/host_copier.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "ringsafe/error.hpp"

namespace ringsafe::device {
namespace {

std::atomic<std::size_t> live_blocks{0};

std::string hex(const void* p) {
    char text[32];
    std::snprintf(text, sizeof text, "%#zx", static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(p)));
    return text;
}

}  // namespace

host_copier::host_copier(std::size_t slots, stand_in_hooks hooks)
    : hooks_(std::move(hooks)), slots_(slots), thread_([this] { run(); }) {}

host_copier::~host_copier() {
    {
        std::lock_guard lk(m_);
        stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    trace("copier stopped");
}

staging_block host_copier::allocate_staging(std::size_t size) {
    auto* p = static_cast<std::byte*>(::operator new(size, std::align_val_t{4096}));
    live_blocks.fetch_add(1);
    // The block may outlive the copier: it keeps its own copy of the trace hook.
    return staging_block(p, size, [trace = hooks_.trace](std::byte* q) {
        ::operator delete(q, std::align_val_t{4096});
        live_blocks.fetch_sub(1);
        if (trace) trace("staging freed");
    });
}

void host_copier::submit(std::size_t slot, std::vector<copy_piece> pieces) {
    {
        std::lock_guard lk(m_);
        slots_.at(slot) = slot_state{true, false, nullptr};
        job j;
        j.slot = slot;
        j.pieces = std::move(pieces);
        queue_.push_back(std::move(j));
    }
    cv_.notify_all();
}

void host_copier::after_stream(void* stream) {
    {
        std::lock_guard lk(m_);
        job j;
        j.what = job::kind::wait_stream;
        j.stream = stream;
        queue_.push_back(std::move(j));
    }
    cv_.notify_all();
}

void host_copier::before_stream(void* stream) {
    std::unique_lock lk(m_);
    job j;
    j.what = job::kind::record_done;
    queue_.push_back(std::move(j));
    const std::uint64_t mine = ++records_queued_;
    cv_.notify_all();
    cv_.wait(lk, [&] { return records_taken_ >= mine; });
    lk.unlock();
    trace("stream " + hex(stream) + " waits for done");
}

void host_copier::wait(std::size_t slot) {
    std::unique_lock lk(m_);
    slot_state& s = slots_.at(slot);
    if (!s.busy) return;
    cv_.wait(lk, [&] { return s.done; });
    s.busy = false;
    if (auto e = std::exchange(s.error, nullptr)) std::rethrow_exception(e);
}

std::size_t host_copier::outstanding() const {
    std::lock_guard lk(m_);
    std::size_t n = 0;
    for (const auto& s : slots_) n += s.busy;
    return n;
}

std::size_t host_copier::live_staging() noexcept { return live_blocks.load(); }

void host_copier::run() {
    for (;;) {
        job j;
        {
            std::unique_lock lk(m_);
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping with nothing queued
            j = std::move(queue_.front());
            queue_.pop_front();
        }
        if (j.what == job::kind::wait_stream) {
            trace("wait for stream " + hex(j.stream));
            continue;
        }
        if (j.what == job::kind::record_done) {
            trace("record done");
            {
                std::lock_guard lk(m_);
                ++records_taken_;
            }
            cv_.notify_all();
            continue;
        }
        std::exception_ptr error;
        for (const copy_piece& p : j.pieces) {
            const std::uint64_t n = next_piece_++;
            if (error) continue;  // a failed slot copies nothing more (as a failed stream)
            try {
                if (hooks_.before_copy) hooks_.before_copy(n);
                if (hooks_.fail_piece && *hooks_.fail_piece == n)
                    raise(errc::IoError, "copying " + describe_piece(p) + " to device memory through the host stand-in: "
                                         "injected copy failure (piece " + std::to_string(n) + ")");
                if (p.size) std::memcpy(p.dst, p.src, p.size);
                trace("copy " + std::to_string(n));
            } catch (...) {
                error = std::current_exception();
            }
        }
        {
            std::lock_guard lk(m_);
            slots_[j.slot].done = true;
            slots_[j.slot].error = error;
        }
        cv_.notify_all();
    }
}

}  // namespace ringsafe::device

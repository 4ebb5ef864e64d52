// What an async_reader holds (engine-internal): the reader, the strand that
// serializes its engine, and the ring.
#pragma once

#include <atomic>
#include <memory>
#include <set>

#include "asio/ring_driver.hpp"
#include "ringsafe/asio.hpp"

namespace ringsafe::asio {

namespace detail {
struct read_operation;
}

struct async_reader::impl {
    impl(executor_type ex, reader r, const async_options& opts);
    // Adopts a strand and ring already made (async_open opened the files on them).
    impl(detail::engine_strand s, std::shared_ptr<uring::event_ring> rg, reader r);

    reader rd;
    detail::engine_strand strand;
    std::shared_ptr<uring::event_ring> ring;
    // Outstanding operations, for async_reader::cancel(); touched on the
    // strand. Weak: an operation is owned by its pending work (ring jobs,
    // pool tasks, HTTP runs), so that destroying that work (the io_context
    // destroyed mid-read) frees it and this reader.
    std::set<std::weak_ptr<detail::read_operation>, std::owner_less<>> active;
    std::atomic<unsigned> outstanding{0};  // operations initiated and not yet completed
};

}  // namespace ringsafe::asio

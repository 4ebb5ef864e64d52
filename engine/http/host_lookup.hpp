// Host-name resolution that a deadline can walk away from (engine-internal).
//
// getaddrinfo cannot be interrupted. Asio's resolver runs it on a thread per
// io_context that the io_context's run() waits on and its destruction joins,
// so a name server that never answers held a blocking open for the system
// resolver's whole timeout, whatever connect_timeout said. Here each lookup
// runs getaddrinfo on a detached thread of its own that shares the lookup's
// state (host, answer, an eventfd) through a shared_ptr and touches no Asio
// object: each waiting coroutine polls the eventfd on its own executor, and on
// the deadline (or when abandoned) it just stops waiting. The io_context then
// runs out of work at once and may be destroyed; the thread ends, freeing the
// state and closing the eventfd, when getaddrinfo returns. Lookups of the same
// host and port that overlap (a read's connections, opens on other threads)
// share one lookup: one thread and one set of queries, however many wait.
#pragma once

#include <chrono>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "http/url.hpp"
#include "source/abandon_list.hpp"

namespace ringsafe::http {

// `target`'s host and port resolved (TCP, IPv4 and IPv6), on the calling
// coroutine's executor, within `timeout`. Throws ringsafe::error HttpError
// naming the URL (unknown host, or "timed out after N ms
// (http_options::connect_timeout)"), and transport_failure when `abandon` is
// abandoned meanwhile.
boost::asio::awaitable<std::vector<boost::asio::ip::tcp::endpoint>> resolve_host(const url& target,
                                                                                std::chrono::milliseconds timeout,
                                                                                detail::abandon_list* abandon);

}  // namespace ringsafe::http

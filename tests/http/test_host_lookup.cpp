// Host-name lookups (engine/http/host_lookup.hpp) that overlap share one
// getaddrinfo: every waiter gets the whole answer. "localhost" resolves from
// /etc/hosts, without a name server.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "http/host_lookup.hpp"
#include "http/url.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::http;
namespace net = boost::asio;

TEST_CASE("overlapping lookups of one host each get every address") {
    const url target = parse_url("http://localhost:9/m.safetensors");
    net::io_context io;
    constexpr int waiters = 16;
    std::vector<std::vector<net::ip::tcp::endpoint>> got(waiters);
    std::vector<std::string> failed(waiters);
    // All started before the io_context runs: each coroutine begins its lookup on
    // its first resumption, one after the other on this thread, while the first
    // lookup's thread is still starting.
    for (int i = 0; i < waiters; ++i)
        net::co_spawn(io, resolve_host(target, std::chrono::seconds(10), nullptr),
                      [&, i](std::exception_ptr e, std::vector<net::ip::tcp::endpoint> eps) {
                          if (e) {
                              try {
                                  std::rethrow_exception(e);
                              } catch (const std::exception& x) {
                                  failed[i] = x.what();
                              }
                          }
                          got[i] = std::move(eps);
                      });
    io.run();
    REQUIRE_FALSE(got[0].empty());
    for (int i = 0; i < waiters; ++i) {
        INFO("waiter " << i << (failed[i].empty() ? "" : ": " + failed[i]));
        CHECK(failed[i].empty());
        CHECK(got[i] == got[0]);
        for (auto& ep : got[i]) CHECK(ep.port() == 9);
    }
}

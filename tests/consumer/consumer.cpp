// A consumer of the installed ringsafe: async_open + async_read on an io_context.
#include <cstdio>
#include <vector>
#include <boost/asio/io_context.hpp>
#include "ringsafe/asio.hpp"
int main(int, char** argv) {
    boost::asio::io_context io;
    int rc = 1;
    ringsafe::asio::async_open(io.get_executor(), argv[1],
        [&](ringsafe::asio::error_code ec, ringsafe::asio::async_reader r) {
            if (ec) { std::fprintf(stderr, "open: %s\n", ec.message().c_str()); return; }
            auto holder = std::make_shared<ringsafe::asio::async_reader>(std::move(r));
            auto sel = holder->get().all();
            auto arena = std::make_shared<std::vector<std::byte>>(holder->get().packed_size(sel));
            auto plan = holder->get().plan_packed(sel, *arena);
            ringsafe::asio::async_read(*holder, plan, [&rc, holder, arena, plan](ringsafe::asio::error_code ec, std::size_t n) {
                if (ec) { std::fprintf(stderr, "read: %s\n", ec.message().c_str()); return; }
                std::printf("%zu tensors, %zu bytes\n", holder->get().tensors().size(), n);
                rc = n == plan.total_bytes() ? 0 : 1;
            });
        });
    io.run();
    return rc;
}

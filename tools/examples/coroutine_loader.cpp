// Example: a coroutine service that loads selected tensors of a sharded
// checkpoint concurrently on its own io_context while a 1 ms steady timer
// keeps ticking, then checks that the ticks kept coming during the load (the
// io_context thread was never blocked), that progress callbacks reported every
// byte and every tensor, and that every byte is right.
//
//   coroutine_loader            generate a 3-shard checkpoint in a temp dir
//   coroutine_loader INDEX GLOB load an existing one (no byte check); INDEX
//                               may be a path or an http(s):// or s3:// URL
//
// Exit status 0 on success, 1 on a failure (with the reason on stderr).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ringsafe/asio.hpp"

namespace net = boost::asio;
namespace ra = ringsafe::asio;
using clock_type = std::chrono::steady_clock;

namespace {

std::byte expected(std::uint32_t tensor, std::uint64_t i) {
    return static_cast<std::byte>((i * 131 + tensor * 7 + (i >> 12)) & 0xff);
}

// Writes shard `s` of `tensors` tensors of `bytes` each, named layer.<k>.w / .b.
void write_shard(const std::filesystem::path& p, unsigned s, unsigned tensors, std::uint64_t bytes) {
    std::vector<ringsafe::tensor_entry> entries;
    for (unsigned k = 0; k < tensors; ++k) {
        const unsigned id = s * tensors + k;
        ringsafe::tensor_entry e;
        e.name = "layer." + std::to_string(id / 2) + (id % 2 ? ".b" : ".w");
        e.dtype = ringsafe::dtype::U8;
        e.shape = {bytes};
        e.begin = k * bytes;
        e.end = e.begin + bytes;
        entries.push_back(e);
    }
    const std::string json = ringsafe::serialize_header(entries, nullptr);
    std::ofstream f(p, std::ios::binary);
    const std::uint64_t n = json.size();
    char prefix[8];
    for (int b = 0; b < 8; ++b) prefix[b] = static_cast<char>(n >> (8 * b));
    f.write(prefix, 8);
    f.write(json.data(), static_cast<std::streamsize>(n));
    std::vector<std::byte> data(bytes);
    for (unsigned k = 0; k < tensors; ++k) {
        for (std::uint64_t i = 0; i < bytes; ++i) data[i] = expected(s * tensors + k, i);
        f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(bytes));
    }
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

struct stats {
    unsigned ticks_while_loading = 0;
    std::uint64_t bytes_landed = 0;  // summed from the reads' progress callbacks
    std::size_t tensors_done = 0;    // from their per-tensor callbacks
    std::chrono::microseconds max_gap{0};
    bool loading = false;        // reads in flight (set by the service)
    bool finished = false;       // the service ended: the ticker stops
    clock_type::time_point start;  // when the reads were started
};

net::awaitable<void> ticker(stats& st) {
    net::steady_timer t(co_await net::this_coro::executor);
    auto last = clock_type::now();
    while (!st.finished) {
        t.expires_after(std::chrono::milliseconds(1));
        co_await t.async_wait(net::use_awaitable);
        const auto now = clock_type::now();
        if (st.loading) {
            ++st.ticks_while_loading;
            const auto since = std::max(last, st.start);
            st.max_gap = std::max(st.max_gap, std::chrono::duration_cast<std::chrono::microseconds>(now - since));
        }
        last = now;
    }
}

// Reads one tensor into its buffer, reporting progress into `st` (the
// callbacks run on this io_context's thread, so plain counters do).
net::awaitable<void> load_one(ra::async_reader& r, std::string name, std::vector<std::byte>& dst, stats& st) {
    std::vector<std::string> names{name};
    auto sel = r.get().select(names);
    std::vector<std::span<std::byte>> dsts{std::span<std::byte>(dst)};
    ra::read_callbacks cb;
    cb.on_progress = [&st, last = std::uint64_t{0}](std::uint64_t done, std::uint64_t) mutable {
        st.bytes_landed += done - last;
        last = done;
    };
    cb.on_tensor_done = [&st](std::size_t, const ringsafe::tensor_info&) { ++st.tensors_done; };
    co_await ra::async_read(r, sel, dsts, cb, net::use_awaitable);
}

net::awaitable<int> service(std::string index, std::string glob, bool check, stats& st) {
    auto ex = co_await net::this_coro::executor;
    auto r = co_await ra::async_open(ex, index, net::use_awaitable);
    auto sel = r.get().select_glob(glob);
    // (Allocated before the clock starts: first-touch page faults of fresh
    // memory are slow on some VMs, and they happen on this thread.)
    std::vector<std::vector<std::byte>> bufs;
    for (auto i : sel.indices()) bufs.emplace_back(r.get().tensors()[i].size());

    // One coroutine per tensor, all in flight at once; `done` wakes us when the last one ends.
    net::steady_timer done(ex, clock_type::time_point::max());
    std::size_t pending = sel.size();
    std::exception_ptr first_error;
    const auto t0 = clock_type::now();
    st.start = t0;
    st.loading = true;
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const std::string name = r.get().tensors()[sel.indices()[k]].name;
        net::co_spawn(ex, load_one(r, name, bufs[k], st), [&](std::exception_ptr e) {
            if (e && !first_error) first_error = e;
            if (--pending == 0) done.cancel();
        });
    }
    if (pending > 0) co_await done.async_wait(net::as_tuple(net::use_awaitable));
    const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    st.loading = false;
    st.finished = true;
    if (first_error) std::rethrow_exception(first_error);

    std::uint64_t bytes = 0;
    for (auto& b : bufs) bytes += b.size();
    std::printf("loaded %zu tensors (%.1f MiB) from %zu shards in %.3f s; %u timer ticks meanwhile, max gap %.2f ms\n",
                sel.size(), bytes / 1048576.0, r.get().shards().size(), secs, st.ticks_while_loading,
                st.max_gap.count() / 1000.0);
    if (check) {
        for (std::size_t k = 0; k < sel.size(); ++k) {
            const std::uint32_t id = sel.indices()[k];
            for (std::uint64_t i = 0; i < bufs[k].size(); ++i)
                if (bufs[k][i] != expected(id, i)) {
                    std::fprintf(stderr, "tensor %s: wrong byte at %llu\n", r.get().tensors()[id].name.c_str(),
                                 static_cast<unsigned long long>(i));
                    co_return 1;
                }
        }
    }
    if (st.bytes_landed != bytes || st.tensors_done != sel.size()) {
        std::fprintf(stderr, "progress reported %llu bytes and %zu tensors, expected %llu and %zu\n",
                     static_cast<unsigned long long>(st.bytes_landed), st.tensors_done,
                     static_cast<unsigned long long>(bytes), sel.size());
        co_return 1;
    }
    if (st.ticks_while_loading == 0) {
        std::fprintf(stderr, "the timer never ticked while tensors were loading: the io_context was blocked\n");
        co_return 1;
    }
    co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string index, glob = "layer.*.w";
    std::filesystem::path tmp;
    bool check = false;
    if (argc >= 3) {
        index = argv[1];
        glob = argv[2];
    } else {
        char pattern[] = "/tmp/ringsafe-example-XXXXXX";
        if (!::mkdtemp(pattern)) return std::perror("mkdtemp"), 1;
        tmp = pattern;
        // 3 shards x 8 tensors x 8 MiB = 192 MiB; the glob selects half of them.
        std::string map;
        for (unsigned s = 0; s < 3; ++s) {
            const std::string shard = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
            write_shard(tmp / shard, s, 8, 8u << 20);
            for (unsigned k = 0; k < 8; ++k) {
                const unsigned id = s * 8 + k;
                if (!map.empty()) map += ",";
                map += "\"layer." + std::to_string(id / 2) + (id % 2 ? ".b" : ".w") + "\":\"" + shard + "\"";
            }
        }
        std::ofstream(tmp / "model.safetensors.index.json") << "{\"metadata\":{},\"weight_map\":{" << map << "}}";
        index = (tmp / "model.safetensors.index.json").string();
        check = true;
    }
    int rc = 1;
    try {
        net::io_context io;  // one thread: this one
        stats st;
        net::co_spawn(io, ticker(st), net::detached);
        net::co_spawn(io, service(index, glob, check, st), [&](std::exception_ptr e, int r) {
            st.loading = false;
            st.finished = true;
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::fprintf(stderr, "error: %s\n", x.what());
                }
            } else {
                rc = r;
            }
        });
        io.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
    }
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    return rc;
}

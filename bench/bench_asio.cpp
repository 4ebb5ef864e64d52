// bench_asio: does the Asio front end (ringsafe::asio::async_read on an
// io_context, eventfd-driven ring, IOSQE_ASYNC) move bench_read's hot-cache
// selection as fast as the synchronous reader? Same checkpoint generator
// (bench_checkpoint), same ranges (every tensor, congruent placement), same
// THP arena; arms interleaved in each repetition; median GB/s; target >= 0.95x.
//
//   bench_asio [--size N[K|M|G]] [--reps N] [--file PATH] [--qd N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "bench_args.hpp"
#include "bench_checkpoint.hpp"
#include "bench_report.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/buffer.hpp"

using namespace ringsafe;
using namespace ringsafe::bench;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<read_request> requests(const std::vector<bench_range>& rs, std::byte* arena) {
    std::vector<read_request> reqs;
    for (const auto& x : rs) {
        read_request q;
        q.tensor = x.tensor;
        q.dst = {arena + x.at, x.length};
        reqs.push_back(std::move(q));
    }
    return reqs;
}

bool verify(const std::vector<bench_range>& rs, const std::byte* arena) {
    for (const auto& r : rs)
        for (std::uint64_t k = 0; k < r.length; k += (k < 4096 || r.length - k < 4096) ? 1 : 4093)
            if (arena[r.at + k] != content_byte(r.offset + k)) {
                std::fprintf(stderr, "bench_asio: WRONG BYTE in %s at +%llu\n", r.tensor.c_str(),
                             static_cast<unsigned long long>(k));
                return false;
            }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t size = 1ull << 30;
    unsigned reps = 5;
    std::string file = "/tmp/ringsafe-bench-asio.safetensors";
    asio::async_options aopts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--size") {
            size = parse_size(next());
        } else if (a == "--reps") {
            reps = static_cast<unsigned>(std::stoul(next()));
        } else if (a == "--file") {
            file = next();
        } else if (a == "--qd") {
            aopts.queue_depth = static_cast<unsigned>(std::stoul(next()));
        } else {
            std::fprintf(stderr, "usage: bench_asio [--size N[K|M|G]] [--reps N] [--file PATH] [--qd N]\n");
            return 2;
        }
    }
    auto ck = make_checkpoint(file, size);
    auto rs = full_ranges(ck);
    const std::uint64_t arena_size = place_congruent(rs);
    std::uint64_t bytes = 0;
    for (auto& r : rs) bytes += r.length;
    host_buffer arena(arena_size, {page_kind::huge, true});
    std::printf("# bench_asio: %s, %.2f GB selected (%zu tensors), %u reps, async queue depth %u, THP arena %s\n",
                file.c_str(), bytes / 1e9, rs.size(), reps, aopts.queue_depth, arena.pages().label().c_str());

    // Both arms: open + plan + execute, timed, into the same arena.
    // The arena is cleared before each arm (untimed) so verify() sees that arm's bytes.
    auto sync_arm = [&] {
        std::memset(arena.data(), 0, arena.size());
        const auto t0 = std::chrono::steady_clock::now();
        reader r = reader::open(file);
        r.execute(r.plan(requests(rs, arena.data())));
        return seconds_since(t0);
    };
    auto async_arm = [&] {
        std::memset(arena.data(), 0, arena.size());
        const auto t0 = std::chrono::steady_clock::now();
        boost::asio::io_context io;
        asio::async_reader r(io.get_executor(), reader::open(file), aopts);
        asio::error_code result = make_error_code(errc::IoError);
        asio::async_read(r, r.get().plan(requests(rs, arena.data())),
                         [&](asio::error_code ec, std::size_t) { result = ec; });
        io.run();
        if (result) throw error(static_cast<std::error_code>(result), "bench_asio: async_read failed");
        return seconds_since(t0);
    };
    sync_arm();  // warm the page cache and the arena
    arm_result s{"hot, all tensors", "ringsafe reader (sync)", arena.pages().label(), double(bytes), {}, ""};
    arm_result a{"hot, all tensors", "ringsafe::asio::async_read", arena.pages().label(), double(bytes), {}, ""};
    for (unsigned k = 0; k < reps; ++k) {
        // Alternate which arm goes first.
        if (k % 2 == 0) {
            s.gbps.push_back(bytes / sync_arm() / 1e9);
            if (!verify(rs, arena.data())) return 1;
            a.gbps.push_back(bytes / async_arm() / 1e9);
            if (!verify(rs, arena.data())) return 1;
        } else {
            a.gbps.push_back(bytes / async_arm() / 1e9);
            if (!verify(rs, arena.data())) return 1;
            s.gbps.push_back(bytes / sync_arm() / 1e9);
            if (!verify(rs, arena.data())) return 1;
        }
    }
    print_case({s, a}, "ringsafe reader (sync)");
    print_targets({{"async_read / sync reader (hot, THP arena)", a.median() / s.median(), 0.95}});
    return 0;
}

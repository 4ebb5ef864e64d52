// bench_asio_write: does the Asio writer (ringsafe::asio::async_write +
// async_finish on one io_context thread, driven by the writer ring's eventfd)
// write a checkpoint as fast as the blocking writer? Same tensors, same
// default writer_options (O_DIRECT, 16 MiB blocks, fsync + directory fsync);
// arms interleaved in each repetition, alternating which goes first; median
// GB/s (file bytes / wall time from constructing the writer to the published
// file); target >= 0.95x. The first repetition checks both files are equal.
//
//   bench_asio_write [--size N[K|M|G]] [--tensors N] [--reps N] [--dir PATH] [--quick]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "bench_args.hpp"
#include "bench_report.hpp"
#include "ringsafe/asio.hpp"

using namespace ringsafe;
using namespace ringsafe::bench;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct tensor_slice {
    std::string name;
    std::span<const std::byte> bytes;
};

bool same_file(const std::string& a, const std::string& b) {
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    std::vector<char> x(1 << 20), y(1 << 20);
    for (;;) {
        fa.read(x.data(), static_cast<std::streamsize>(x.size()));
        fb.read(y.data(), static_cast<std::streamsize>(y.size()));
        if (fa.gcount() != fb.gcount() || std::memcmp(x.data(), y.data(), static_cast<std::size_t>(fa.gcount())) != 0)
            return false;
        if (fa.gcount() == 0) return true;
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t size = 512ull << 20;
    unsigned tensors = 16, reps = 5;
    std::string dir = "/tmp";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--size") {
            size = parse_size(next());
        } else if (a == "--tensors") {
            tensors = static_cast<unsigned>(std::stoul(next()));
        } else if (a == "--reps") {
            reps = static_cast<unsigned>(std::stoul(next()));
        } else if (a == "--dir") {
            dir = next();
        } else if (a == "--quick") {
            size = 64ull << 20;
        } else {
            std::fprintf(stderr, "usage: bench_asio_write [--size N[K|M|G]] [--tensors N] [--reps N] [--dir PATH] [--quick]\n");
            return 2;
        }
    }
    if (tensors == 0 || reps == 0) return 2;
    // One buffer holds every tensor (a pattern that does not compress or dedupe trivially).
    std::vector<std::byte> data(size);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (std::uint64_t i = 0; i < size; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(data.data() + i, &x, std::min<std::uint64_t>(8, size - i));
    }
    std::vector<tensor_slice> ts;
    const std::uint64_t per = size / tensors;
    for (unsigned k = 0; k < tensors; ++k) {
        const std::uint64_t len = k + 1 == tensors ? size - per * k : per;
        ts.push_back({"layers." + std::to_string(k) + ".weight", std::span<const std::byte>(data).subspan(per * k, len)});
    }
    const std::string blocking_path = dir + "/ringsafe-bench-write-blocking.safetensors";
    const std::string async_path = dir + "/ringsafe-bench-write-async.safetensors";
    std::printf("# bench_asio_write: %.2f GB in %u tensors to %s, %u reps, default writer_options (O_DIRECT, sync)\n",
                size / 1e9, tensors, dir.c_str(), reps);

    auto blocking_arm = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        writer w(blocking_path);
        for (auto& t : ts) w.add(t.name, dtype::U8, {t.bytes.size()}, t.bytes);
        w.finish();
        return seconds_since(t0);
    };
    auto async_arm = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        boost::asio::io_context io;
        asio::async_writer w(io.get_executor(), writer(async_path));
        asio::error_code result;
        for (auto& t : ts)
            asio::async_write(w, t.name, dtype::U8, {t.bytes.size()}, t.bytes, [&](asio::error_code ec, std::size_t) {
                if (ec) result = ec;
            });
        asio::async_finish(w, std::nullopt, [&](asio::error_code ec, std::size_t) {
            if (ec) result = ec;
        });
        io.run();
        if (result) throw error(static_cast<std::error_code>(result), "bench_asio_write: async write failed");
        return seconds_since(t0);
    };
    const double file_bytes = static_cast<double>(size);
    arm_result b{"checkpoint write", "ringsafe writer (blocking)", "heap src", file_bytes, {}, ""};
    arm_result a{"checkpoint write", "async_write+finish, 1 thread", "heap src", file_bytes, {}, ""};
    for (unsigned k = 0; k < reps; ++k) {
        if (k % 2 == 0) {
            b.gbps.push_back(file_bytes / blocking_arm() / 1e9);
            a.gbps.push_back(file_bytes / async_arm() / 1e9);
        } else {
            a.gbps.push_back(file_bytes / async_arm() / 1e9);
            b.gbps.push_back(file_bytes / blocking_arm() / 1e9);
        }
        if (k == 0 && !same_file(blocking_path, async_path)) {
            std::fprintf(stderr, "bench_asio_write: the two arms wrote different files\n");
            return 1;
        }
        std::filesystem::remove(blocking_path);
        std::filesystem::remove(async_path);
    }
    print_case({b, a}, "ringsafe writer (blocking)");
    print_targets({{"async_write+finish / blocking writer", a.median() / b.median(), 0.95}});
    return 0;
}

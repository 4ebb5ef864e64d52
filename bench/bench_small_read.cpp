// bench_small_read: the fixed cost of small reads on one open reader (the
// io-wq hop, a thread per execute), as median and p99 latency per read.
//   bench_small_read FILE [--reps N]
// FILE must hold at least fifteen tensors of at most 64 KiB. Arms, per
// buffered mode (auto, hot, hot without async_punt, cold): one tensor per
// read, and eight tensors (every other one, so that they are separate reads)
// in one plan. Runs interleaved; the page cache is warmed first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "ringsafe/reader.hpp"

using namespace ringsafe;
using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_small_read FILE [--reps N]\n");
        return 2;
    }
    const std::string path = argv[1];
    unsigned reps = 1000;
    for (int i = 2; i + 1 < argc; ++i)
        if (std::string(argv[i]) == "--reps") reps = static_cast<unsigned>(std::stoul(argv[++i]));

    struct mode_arm {
        const char* name;
        file_options::buffered_mode mode;
        bool punt;
    };
    const mode_arm modes[] = {{"auto", file_options::buffered_mode::automatic, true},
                              {"hot", file_options::buffered_mode::hot, true},
                              {"hot-nopunt", file_options::buffered_mode::hot, false},
                              {"cold", file_options::buffered_mode::cold, true}};
    struct arm {
        std::string name;
        std::function<void()> run;
        std::vector<double> us;
    };
    std::vector<reader> readers;
    std::vector<std::vector<std::byte>> bufs;
    std::vector<arm> arms;
    for (const auto& m : modes) {
        reader_options o;
        o.source.file.mode = m.mode;
        o.source.file.async_punt = m.punt;
        readers.push_back(reader::open(path, o));
    }
    // Tensors of at most 64 KiB in data order; every other one of the first fifteen.
    std::vector<std::string> small;
    unsigned seen = 0;
    for (const auto& t : readers[0].tensors())
        if (t.size() <= (64u << 10) && seen++ % 2 == 0 && small.size() < 8) small.push_back(t.name);
    if (small.size() < 8) {
        std::fprintf(stderr, "%s: needs fifteen tensors of at most 64 KiB\n", path.c_str());
        return 1;
    }
    for (std::size_t i = 0; i < std::size(modes); ++i) {
        reader* r = &readers[i];
        const selection one = r->select({small[0]});
        const selection eight = r->select(small);
        const std::uint64_t n8 = r->packed_size(eight);
        auto b1 = std::make_shared<std::vector<std::byte>>(r->at(small[0]).size());
        auto b8 = std::make_shared<std::vector<std::byte>>(n8);
        arms.push_back({std::string(modes[i].name) + " 1 tensor", [r, one, b1] {
                            std::span<std::byte> d(*b1);
                            r->read(one, {&d, 1});
                        }, {}});
        arms.push_back({std::string(modes[i].name) + " 8 apart", [r, eight, b8] {
                            r->read_packed(eight, *b8);
                        }, {}});
    }
    for (auto& a : arms) a.run();  // warm: rings made, pages cached
    for (unsigned k = 0; k < reps; ++k)
        for (auto& a : arms) {
            const auto t0 = clk::now();
            a.run();
            a.us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
        }
    std::printf("%-22s %10s %10s   (%u reads each, interleaved)\n", "arm", "median us", "p99 us", reps);
    for (auto& a : arms) {
        std::sort(a.us.begin(), a.us.end());
        std::printf("%-22s %10.2f %10.2f\n", a.name.c_str(), a.us[a.us.size() / 2],
                    a.us[std::min(a.us.size() - 1, a.us.size() * 99 / 100)]);
    }
    return 0;
}

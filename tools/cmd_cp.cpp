// `ringsafe cp`: copies a selection of a checkpoint into a new file in one
// pass: a reader thread fills huge-page buffers through the source's executor
// while the streaming writer writes the previous ones from those same buffers
// (zero-copy: each batch sits in its buffer at the file offset's alignment).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "args.hpp"
#include "command.hpp"
#include "http_flags.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

constexpr std::string_view help =
    "usage: ringsafe cp SOURCE OUT.safetensors [--select PATTERN]... [options]\n"
    "Copies the selected tensors (all by default) and the metadata of SOURCE (a\n"
    "path, URL or sharded index) into a new file, reading and writing at once.\n"
    "\n"
    "  --select PATTERN   glob over tensor names (*, ?, [...]); repeatable\n"
    "  --buffer SIZE      bytes per pipeline buffer (default 64M)\n"
    "  --buffers N        pipeline buffers (default 4)\n"
    "  --no-direct        buffered writes instead of O_DIRECT\n"
    "  --no-sync          skip fsync of the file and directory\n"
    "  --json             print {\"bytes\":...,\"seconds\":...,\"gbps\":...,\"peak_rss_kib\":...}\n"
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help         this text\n"
    "\n"
    "Progress goes to stderr when it is a terminal. Exit status: 0 copied,\n"
    "1 failed (nothing at OUT), 2 bad usage.\n";

// VmHWM of this process (KiB), 0 when unknown.
unsigned long long peak_rss_kib() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmHWM: %llu", &v) == 1) break;
    std::fclose(f);
    return v;
}

struct piece {
    std::uint32_t tensor;  // index in reader::tensors()
    std::uint64_t offset;  // within the tensor
    std::uint64_t length;
};

struct batch {
    std::vector<piece> pieces;
    std::uint32_t shard = 0;
    std::uint64_t bytes = 0;
};

// A fixed pool of buffers handed out to the read thread and given back when
// the writer releases the last hold on them.
class buffer_pool {
public:
    buffer_pool(std::size_t count, std::size_t size) {
        for (std::size_t i = 0; i < count; ++i) {
            bufs_.emplace_back(size);
            free_.push_back(i);
        }
    }
    std::size_t take() {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return !free_.empty(); });
        auto i = free_.front();
        free_.pop_front();
        return i;
    }
    void give(std::size_t i) {
        std::lock_guard l(mu_);
        free_.push_back(i);
        cv_.notify_all();
    }
    std::byte* data(std::size_t i) { return bufs_[i].data(); }

private:
    std::vector<host_buffer> bufs_;
    std::deque<std::size_t> free_;
    std::mutex mu_;
    std::condition_variable cv_;
};

struct filled {
    std::size_t buf;
    std::size_t batch;
    std::string error;  // non-empty: the read failed
};

int run(const std::vector<std::string_view>& args) {
    arg_parser p(args);
    for (auto f : {"--help", "-h", "--no-direct", "--no-sync", "--json"}) p.flag(f);
    for (auto o : {"--select", "--buffer", "--buffers"}) p.option(o);
    declare_http_flags(p);
    reader_options ro;
    std::uint64_t buf_size = 0, nbufs = 0;
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().size() != 2) throw usage_error{"expected SOURCE and OUT.safetensors"};
        buf_size = p.size_or("--buffer", 64u << 20);
        nbufs = p.uint_or("--buffers", 4);
        if (buf_size < (1u << 20) || nbufs < 2) throw usage_error{"--buffer must be >= 1M and --buffers >= 2"};
        apply_http_flags(p, ro.source.http);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe cp: %s\n\n%.*s", e.message.c_str(), static_cast<int>(help.size()), help.data());
        return exit_usage;
    }
    const std::string src = p.positional()[0], out = p.positional()[1];
    try {
        auto t0 = std::chrono::steady_clock::now();
        auto r = reader::open(src, ro);
        auto patterns = p.values("--select");
        auto sel = patterns.empty() ? r.all() : r.select_glob(patterns);
        auto tensors = r.tensors();

        // Exact header size is known: reserve it so nothing ever relocates.
        std::vector<tensor_entry> entries;
        std::uint64_t pos = 0;
        for (auto i : sel.indices()) {
            auto& t = tensors[i];
            entries.push_back({t.name, t.dtype, t.shape, pos, pos + t.size()});
            pos += t.size();
        }
        const metadata_map* meta = r.metadata() ? &*r.metadata() : nullptr;
        writer_options wo;
        wo.reserve_bytes = serialized_json_size(entries, meta);
        wo.direct = !p.has("--no-direct");
        wo.sync = wo.sync_dir = !p.has("--no-sync");
        writer w(out, wo);

        // Cut the selection into batches of at most buf_size bytes, one shard each.
        std::vector<batch> batches(1);
        for (auto i : sel.indices()) {
            auto& t = tensors[i];
            auto shard = r.shard_of(i);
            for (std::uint64_t off = 0; off < t.size() || (t.size() == 0 && off == 0);) {
                auto* b = &batches.back();
                if ((b->bytes >= buf_size || b->shard != shard) && !b->pieces.empty()) b = &batches.emplace_back();
                b->shard = shard;
                std::uint64_t n = std::min(t.size() - off, buf_size - b->bytes);
                b->pieces.push_back({i, off, n});
                b->bytes += n;
                off += n;
                if (t.size() == 0) break;
            }
        }

        std::map<std::uint32_t, std::unique_ptr<source>> sources;
        for (auto& b : batches)
            if (!sources.count(b.shard)) sources[b.shard] = open_source(r.shards()[b.shard].spec);

        buffer_pool pool(nbufs, buf_size + 4096);
        std::mutex mu;
        std::condition_variable cv;
        std::deque<filled> ready;
        std::atomic<bool> stop{false};
        bool reading_done = false;  // guarded by mu
        // The writer's data section starts 4096-aligned, so a batch placed at
        // (its output offset mod 4096) within a page-aligned buffer is congruent
        // with its file offset: the O_DIRECT writes go straight from the buffer.
        std::vector<std::uint64_t> out_off(batches.size());
        for (std::size_t k = 0, o = 0; k < batches.size(); ++k) out_off[k] = o, o += batches[k].bytes;
        std::thread reading([&] {
            for (std::size_t k = 0; k < batches.size() && !stop; ++k) {
                auto buf = pool.take();
                filled f{buf, k, {}};
                try {
                    auto& b = batches[k];
                    auto& sh = r.shards()[b.shard];
                    std::vector<read_op> ops;
                    std::byte* dst = pool.data(buf) + out_off[k] % 4096;
                    for (auto& pc : b.pieces) {
                        if (pc.length)
                            ops.push_back({sh.data_start + tensors[pc.tensor].begin + pc.offset, pc.length, dst, pc.tensor});
                        dst += pc.length;
                    }
                    if (!ops.empty()) sources[b.shard]->execute(ops, {});
                } catch (const std::exception& e) {
                    f.error = e.what();
                }
                bool failed = !f.error.empty();
                std::lock_guard l(mu);
                ready.push_back(std::move(f));
                cv.notify_all();
                if (failed) break;
            }
            std::lock_guard l(mu);
            reading_done = true;
            cv.notify_all();
        });
        bool tty = ::isatty(2) && !p.has("--json");
        std::uint64_t done = 0;
        std::string failure;
        for (std::size_t k = 0; k < batches.size() && failure.empty(); ++k) {
            filled f;
            try {
                std::unique_lock l(mu);
                while (ready.empty()) {
                    if (w.writes_in_flight()) {
                        // Let finished writes hand their buffers back to the read thread.
                        l.unlock();
                        w.wait_write();
                        l.lock();
                    } else {
                        cv.wait(l);
                    }
                }
                f = std::move(ready.front());
                ready.pop_front();
            } catch (const std::exception& e) {
                failure = e.what();
                break;
            }
            if (!f.error.empty()) {
                failure = f.error;
                pool.give(f.buf);
                break;
            }
            // Released when the writer's last write from this buffer completes.
            std::shared_ptr<const void> hold(pool.data(f.buf), [&pool, i = f.buf](const void*) { pool.give(i); });
            const std::byte* data = pool.data(f.buf) + out_off[k] % 4096;
            try {
                for (auto& pc : batches[k].pieces) {
                    auto& t = tensors[pc.tensor];
                    if (pc.offset == 0) w.begin(t.name, t.dtype, t.shape);
                    w.append(std::span(data, pc.length), hold);
                    data += pc.length;
                    if (pc.offset + pc.length == t.size()) w.end();
                    done += pc.length;
                }
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (tty) {
                double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                std::fprintf(stderr, "\r%s / %s  %.2f GB/s   ", human_bytes(done).c_str(), human_bytes(pos).c_str(),
                             s > 0 ? done / s / 1e9 : 0.0);
            }
        }
        if (!failure.empty()) {
            stop = true;
            w.abandon();  // releases every buffer the writer held
            // Hand back what the read thread still delivers until it stops.
            for (;;) {
                std::unique_lock l(mu);
                cv.wait(l, [&] { return !ready.empty() || reading_done; });
                for (; !ready.empty(); ready.pop_front()) pool.give(ready.front().buf);
                if (reading_done) break;
            }
        }
        reading.join();
        if (!failure.empty()) raise(errc::IoError, "copying '" + src + "' to '" + out + "': " + failure);
        w.finish(meta);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (tty) std::fprintf(stderr, "\n");
        if (p.has("--json"))
            std::printf("{\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.4f,\"peak_rss_kib\":%llu}\n",
                        static_cast<unsigned long long>(pos), s, s > 0 ? pos / s / 1e9 : 0.0, peak_rss_kib());
        else
            std::printf("copied %zu tensors, %s in %.3f s (%.2f GB/s) to %s\n", sel.size(), human_bytes(pos).c_str(), s,
                        s > 0 ? pos / s / 1e9 : 0.0, out.c_str());
        return exit_ok;
    } catch (const error& e) {
        std::fprintf(stderr, "ringsafe cp: %s: %s\n", std::string(e.kind()).c_str(), e.what());
        return exit_invalid;
    }
}

command_registration reg{"cp", "copy a selection of a checkpoint into a new file (one pass)", &run};

}  // namespace

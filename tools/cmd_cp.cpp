// `ringsafe cp`: copies a selection of a checkpoint into a new file as a
// pipeline. The selection is cut into batches of at most one buffer each;
// reader threads fill the buffers of a fixed pool (local files: one thread,
// the file source spreads its reads over its own rings; URLs: two threads,
// each with its own connections, so one batch's last ranges never leave the
// connections idle) while the streaming writer writes the batches, in order,
// straight from those buffers (zero-copy O_DIRECT: each batch sits in its
// buffer at its output offset's alignment). A buffer goes back to the pool
// when the writer's last write from it completes. Memory: --buffers x
// --buffer, allocated as the pipeline first needs them, plus the writer's
// staging blocks for unaligned edges; nothing grows with the file.
// The output is published by rename only when everything is written and
// synced; an error, SIGINT or SIGTERM leaves nothing at OUT.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "args.hpp"
#include "cp_sink.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "progress_bar.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view help =
    "usage: ringsafe cp SOURCE OUT.safetensors|OUT.gguf [--select PATTERN]... [options]\n"
    "Copies the selected tensors (all by default) and the metadata of SOURCE (a\n"
    "path, an http(s)://, s3://, gs://, az:// or hf:// URL, a sharded *.index.json,\n"
    "or a GGUF file or split set) into a new file, converting by OUT's extension:\n"
    "  GGUF -> safetensors: plain tensors keep their type; block types (Q4_K, ...)\n"
    "    are dequantized to --dtype; the GGUF metadata goes into __metadata__ as\n"
    "    \"gguf.KEY\": its value's JSON text (split.* keys dropped).\n"
    "  safetensors -> GGUF: dtypes GGUF has (F32, F16, BF16, F64, I8..I64), shapes\n"
    "    reversed into ne, __metadata__ as STRING entries; a tensor GGUF cannot\n"
    "    hold is an error naming it, before anything is written. Names are kept:\n"
    "    llama.cpp's names per architecture are convert_hf_to_gguf.py's job.\n"
    "  GGUF -> GGUF: tensors (blocks too) and metadata as they are; a split set\n"
    "    becomes one file, or with --split-max-size / --split-max-tensors a split\n"
    "    set OUT-00001-of-0000N.gguf as llama.cpp's gguf-split names and keys it.\n"
    "Reading and writing run as a pipeline: the next batches are read into free\n"
    "buffers while earlier ones are written from theirs (no copy in between).\n"
    "Memory stays at about BUFFERS x SIZE (+ < 64 MiB) whatever the file size.\n"
    "\n"
    "  --select PATTERN   glob over tensor names (*, ?, [...]); repeatable\n"
    "  --buffer SIZE      bytes per pipeline buffer, 1M..16G, rounded up to 4K\n"
    "                     (default 64M; K, M, G suffixes)\n"
    "  --dtype TYPE       what GGUF block tensors become in a safetensors OUT:\n"
    "                     float32 (default, exact), float16 or bfloat16\n"
    "  --max-shard-size SIZE  a safetensors OUT as shards of at most SIZE bytes\n"
    "                     (OUT-00001-of-0000N.safetensors + OUT.safetensors.index.json)\n"
    "  --split-max-size SIZE, --split-max-tensors N\n"
    "                     a GGUF OUT as parts of at most SIZE bytes of tensor data\n"
    "                     (K, M, G suffixes) / N tensors each (a part's first tensor\n"
    "                     may exceed SIZE alone); parts appear one by one\n"
    "  --buffers N        pipeline buffers, 2..1024 (default 4); a batch is read\n"
    "                     into one buffer, so N - 1 batches can be read ahead\n"
    "  --no-direct        buffered writes instead of O_DIRECT\n"
    "  --no-sync          skip fsync of the file and directory\n"
    "  --json             print {\"bytes\":...,\"seconds\":...,\"gbps\":...,\"peak_rss_kib\":...,\n"
    "                     \"buffers\":...,\"buffer_bytes\":...,\"readers\":...,\n"
    "                     \"write_waited_seconds\":...,\"read_waited_seconds\":...}\n"
    "                     (write_waited: the writer waiting for reads; read_waited:\n"
    "                     readers waiting for a free buffer, summed over readers);\n"
    "                     on failure {\"ok\":false,\"error_kind\":\"<kind>\",\"error\":\"<message>\"}\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help         this text\n"
    "\n"
    "OUT is written to a temporary beside it and renamed into place at the end.\n"
    "A progress bar goes to stderr when it is a terminal (not with --json).\n"
    "Exit status: 0 copied, 1 failed (nothing at OUT), 2 bad usage, 130/143\n"
    "interrupted by SIGINT/SIGTERM (nothing at OUT).\n";

constexpr std::uint64_t page = 4096;
constexpr std::uint64_t min_buffer = 1u << 20;
constexpr std::uint64_t max_buffer = 16ull << 30;
constexpr std::uint64_t max_buffers = 1024;

// Set by SIGINT/SIGTERM (and by a failure): everything stops, nothing is published.
std::atomic<bool> stop_requested{false};
volatile sig_atomic_t stop_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
    stop_signal = sig;
    stop_requested.store(true);
}

// SIGINT/SIGTERM set stop_requested for the life of this object (a second
// signal kills the process: SA_RESETHAND; the O_TMPFILE temporary vanishes
// with it, a named one would stay).
class stop_on_signals {
public:
    stop_on_signals() {
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGINT, &sa, &old_int_);
        ::sigaction(SIGTERM, &sa, &old_term_);
    }
    ~stop_on_signals() {
        ::sigaction(SIGINT, &old_int_, nullptr);
        ::sigaction(SIGTERM, &old_term_, nullptr);
    }

private:
    struct sigaction old_int_ {}, old_term_ {};
};

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

// Consecutive output bytes of one shard that fit one buffer.
struct batch {
    std::vector<piece> pieces;
    std::uint32_t shard = 0;
    std::uint64_t out_offset = 0;  // data-section offset of its first byte in OUT
    std::uint64_t bytes = 0;
};

// Cuts the selection, in order, into batches. A batch lies in its buffer at
// (out_offset mod 4096), congruent with its file offset in OUT (whose data
// section starts 4096-aligned), so it holds at most buf_size - that.
std::vector<batch> cut_batches(const reader& r, const selection& sel, std::uint64_t buf_size) {
    auto tensors = r.tensors();
    std::vector<batch> out(1);
    std::uint64_t pos = 0;
    for (auto i : sel.indices()) {
        const auto& t = tensors[i];
        const auto shard = r.shard_of(i);
        std::uint64_t off = 0;
        do {
            auto* b = &out.back();
            const std::uint64_t cap = buf_size - b->out_offset % page;
            if ((b->bytes >= cap || b->shard != shard) && !b->pieces.empty()) {
                b = &out.emplace_back();
                b->out_offset = pos;
            }
            b->shard = shard;
            const std::uint64_t n = std::min(t.size() - off, buf_size - b->out_offset % page - b->bytes);
            b->pieces.push_back({i, off, n});
            b->bytes += n;
            off += n;
            pos += n;
        } while (off < t.size());
    }
    return out;
}

// A fixed number of buffers, allocated (huge pages, prefaulted) by the reader
// that first needs one, so the first read starts after one allocation, not
// all. claim() hands out a free buffer together with the next batch index:
// a reader that holds a batch index always holds a buffer for it, so the
// batch the writer waits for is always being read (no deadlock).
class buffer_pool {
public:
    buffer_pool(std::size_t count, std::size_t size, std::size_t batches)
        : size_(size), batches_(batches), bufs_(count) {}

    struct claim_result {
        std::size_t buf, batch;
    };
    // A buffer and the batch to read into it; nullopt when every batch is
    // claimed or stop_requested. Adds the time spent waiting to `waited`.
    std::optional<claim_result> claim(double& waited) {
        std::unique_lock l(mu_);
        std::optional<std::size_t> buf;
        while (!buf) {
            if (stop_requested || next_batch_ >= batches_) return std::nullopt;
            if (!free_.empty()) {
                buf = free_.back();
                free_.pop_back();
            } else if (allocated_ < bufs_.size()) {
                std::size_t i = allocated_++;
                l.unlock();
                try {
                    bufs_[i] = host_buffer(size_);
                } catch (...) {
                    l.lock();
                    --allocated_;  // lets the caller report it; no other reader retries past stop
                    throw;
                }
                l.lock();
                buf = i;
            } else {
                auto t0 = clock_type::now();
                cv_.wait_for(l, std::chrono::milliseconds(50));  // polls stop_requested (set by a signal)
                waited += std::chrono::duration<double>(clock_type::now() - t0).count();
            }
        }
        if (stop_requested || next_batch_ >= batches_) {
            free_.push_back(*buf);
            return std::nullopt;
        }
        return claim_result{*buf, next_batch_++};
    }
    void give(std::size_t i) {
        std::lock_guard l(mu_);
        free_.push_back(i);
        cv_.notify_all();
    }
    void wake_all() {
        std::lock_guard l(mu_);
        cv_.notify_all();
    }
    std::byte* data(std::size_t i) { return bufs_[i].data(); }
    std::size_t allocated() {
        std::lock_guard l(mu_);
        return allocated_;
    }

private:
    std::size_t size_, batches_;
    std::vector<host_buffer> bufs_;  // sized once; entry i is written only by the reader that allocates it
    std::vector<std::size_t> free_;
    std::size_t allocated_ = 0, next_batch_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
};

struct filled {
    std::size_t buf;
};

// Batches read and not yet written, keyed by batch index; the first read
// error; readers still running.
struct handoff {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::size_t, filled> ready;
    std::string error;
    unsigned running = 0;
};

struct cp_options {
    std::string src, out;
    std::vector<std::string> patterns;
    std::uint64_t buf_size = 64u << 20;
    std::uint64_t nbufs = 4;
    bool direct = true, sync = true, json = false;
    dtype dequantize_to = dtype::F32;  // --dtype
    std::uint64_t split_max_bytes = 0, split_max_tensors = 0;  // --split-max-size / --split-max-tensors
    std::uint64_t max_shard_bytes = 0;                          // --max-shard-size
    http_options http;  // --connections / --chunk (0: the environment's, else the defaults)
    parse_options parse;  // --max-header-size
};

struct cp_result {
    std::uint64_t bytes = 0;
    std::size_t tensors = 0, buffers = 0;
    std::uint64_t buffer_bytes = 0;  // bytes per buffer (--buffer, or less when the largest batch is smaller)
    unsigned readers = 0;
    double seconds = 0, write_waited = 0, read_waited = 0;
    bool interrupted = false;  // stopped by SIGINT/SIGTERM before publishing: nothing at OUT
};

cp_result copy(const cp_options& o) {
    const auto t0 = clock_type::now();
    reader_options ro;
    ro.source.http = o.http;
    ro.parse = o.parse;
    apply_environment_credentials(o.src, ro.source.http);  // HF_TOKEN for the Hub
    auto r = reader::open(o.src, ro);
    auto sel = o.patterns.empty() ? r.all() : r.select_glob(o.patterns);
    auto tensors = r.tensors();

    std::uint64_t total = 0;
    for (auto i : sel.indices()) total += tensors[i].size();
    // A file smaller than the pool is still cut into about one batch per
    // buffer (of at least 4 MiB), so that its reads and writes overlap too.
    const std::uint64_t spread = std::max<std::uint64_t>(4u << 20, (total / o.nbufs + 2 * page - 1) / page * page);
    const auto batches = cut_batches(r, sel, std::min(o.buf_size, spread));

    // URLs: two readers, the connections split between them.
    bool remote = false;
    for (auto& sh : r.shards()) remote = remote || is_url(sh.spec);
    source_options so = ro.source;
    so.http = resolved_http_options(so.http);  // the total to split: flag, else environment, else default
    unsigned readers = 1;
    if (remote && so.http.connections_per_origin >= 2) {
        readers = 2;
        so.http.connections_per_origin /= 2;
    }
    readers = static_cast<unsigned>(std::min<std::size_t>({readers, batches.size(), o.nbufs}));

    // Declared before the writer: the writer's holds give buffers back to it.
    // Buffers no larger than the largest batch needs (a small file, a small pool).
    std::uint64_t extent = page;
    for (auto& b : batches) extent = std::max(extent, b.out_offset % page + b.bytes);
    cp_result res;
    res.buffer_bytes = std::min(o.buf_size, (extent + page - 1) / page * page);
    buffer_pool pool(o.nbufs, res.buffer_bytes, batches.size());
    handoff h;
    res.readers = readers;
    std::vector<double> read_waited(readers, 0.0);

    sink_options sk;
    sk.dequantize_to = o.dequantize_to;
    sk.direct = o.direct;
    sk.sync = o.sync;
    sk.split_max_bytes = o.split_max_bytes;
    sk.split_max_tensors = o.split_max_tensors;
    sk.max_shard_bytes = o.max_shard_bytes;
    auto sink = make_sink(r, sel, o.out, sk);  // every check of the target's format, before any byte
    cp_sink& w = *sink;

    auto read_loop = [&](unsigned id) {
        std::map<std::uint32_t, std::unique_ptr<source>> sources;  // this reader's, per shard
        io_control ctl;
        ctl.cancel = &stop_requested;
        // An op starts at tensor `tag` and may run on into the tensors after it.
        ctl.describe = [&](std::uint32_t tag) { return "the range from tensor '" + tensors[tag].name + "'"; };
        try {
            while (auto c = pool.claim(read_waited[id])) {
                const auto& b = batches[c->batch];
                const auto& sh = r.shards()[b.shard];
                std::vector<read_op> ops;
                std::byte* dst = pool.data(c->buf) + b.out_offset % page;
                for (auto& pc : b.pieces) {
                    const std::uint64_t at = sh.data_start + tensors[pc.tensor].begin + pc.offset;
                    // Neighbours in the source (and so in the buffer) are one range: one
                    // request (URLs) or a few large reads instead of one per small tensor.
                    if (!ops.empty() && ops.back().offset + ops.back().length == at && ops.back().dst + ops.back().length == dst)
                        ops.back().length += pc.length;
                    else if (pc.length)
                        ops.push_back({at, pc.length, dst, pc.tensor});
                    dst += pc.length;
                }
                try {
                    if (!ops.empty()) {
                        auto& s = sources[b.shard];
                        if (!s) s = open_source(sh.spec, so);
                        s->execute(ops, ctl);
                    }
                } catch (...) {
                    pool.give(c->buf);
                    throw;
                }
                std::lock_guard l(h.mu);
                h.ready.emplace(c->batch, filled{c->buf});
                h.cv.notify_all();
            }
        } catch (const std::exception& e) {
            std::lock_guard l(h.mu);
            if (h.error.empty() && !stop_signal) h.error = e.what();
        }
        std::lock_guard l(h.mu);
        --h.running;
        h.cv.notify_all();
    };

    // Stops and joins the readers on every way out of this scope.
    std::vector<std::thread> threads;
    struct joiner {
        std::vector<std::thread>& t;
        buffer_pool& p;
        ~joiner() {
            if (t.empty()) return;
            stop_requested = true;
            p.wake_all();
            for (auto& th : t) th.join();
        }
    } join_readers{threads, pool};
    h.running = readers;
    for (unsigned id = 0; id < readers; ++id) threads.emplace_back(read_loop, id);

    progress_bar bar(total, !o.json && stderr_is_tty());
    std::uint64_t done = 0;
    std::string failure;
    for (std::size_t k = 0; k < batches.size() && failure.empty(); ++k) {
        filled f{};
        {
            std::unique_lock l(h.mu);
            auto t_wait = clock_type::now();
            for (;;) {
                if (auto it = h.ready.find(k); it != h.ready.end()) {
                    f = it->second;
                    h.ready.erase(it);
                    break;
                }
                if (!h.error.empty()) {
                    failure = h.error;
                    break;
                }
                if (stop_requested) break;
                if (h.running == 0) {
                    failure = "the reads stopped before batch " + std::to_string(k);
                    break;
                }
                if (w.writes_in_flight()) {
                    // Reap a finished write: it may hand a buffer back to a reader.
                    l.unlock();
                    try {
                        w.wait_write();
                    } catch (const std::exception& e) {
                        failure = e.what();
                    }
                    l.lock();
                    if (!failure.empty()) break;
                } else {
                    h.cv.wait_for(l, std::chrono::milliseconds(50));  // polls stop_requested
                }
            }
            res.write_waited += std::chrono::duration<double>(clock_type::now() - t_wait).count();
        }
        if (!failure.empty() || stop_requested) break;
        // Released when the writer's last write from this buffer completes.
        std::shared_ptr<const void> hold(pool.data(f.buf), [&pool, i = f.buf](const void*) { pool.give(i); });
        const std::byte* data = pool.data(f.buf) + batches[k].out_offset % page;
        try {
            for (auto& pc : batches[k].pieces) {
                const auto& t = tensors[pc.tensor];
                if (pc.offset == 0) w.begin(t);
                if (pc.length) w.append(std::span(data, pc.length), hold);
                data += pc.length;
                if (pc.offset + pc.length == t.size()) w.end();
                done += pc.length;
            }
        } catch (const std::exception& e) {
            failure = e.what();
        }
        bar.update(done);
    }
    if (!failure.empty() || stop_requested) {
        stop_requested = true;
        w.abandon();  // releases every buffer the writer held; nothing at OUT
        pool.wake_all();
        for (auto& th : threads) th.join();
        threads.clear();
        if (stop_signal) {
            res.interrupted = true;
            return res;
        }
        raise(errc::IoError, "copying '" + o.src + "' to '" + o.out + "': " + failure);
    }
    for (auto& th : threads) th.join();
    threads.clear();
    w.finish();
    bar.finish();
    res.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    res.bytes = total;
    res.tensors = sel.size();
    res.buffers = pool.allocated();
    for (double x : read_waited) res.read_waited += x;
    return res;
}

// Says that a signal stopped the copy; the exit status for it.
int interrupted(const std::string& out) {
    std::fprintf(stderr, "\nringsafe cp: interrupted by %s; nothing written to '%s'\n",
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM", terminal_text(out).c_str());
    return 128 + stop_signal;
}

int run(const std::vector<std::string_view>& args) {
    arg_parser p(args);
    for (auto f : {"--help", "-h", "--no-direct", "--no-sync", "--json"}) p.flag(f);
    for (auto o : {"--select", "--buffer", "--buffers", "--dtype", "--split-max-size", "--split-max-tensors",
                   "--max-shard-size"})
        p.option(o);
    cp_options o;
    declare_http_flags(p);
    declare_header_limit(p);
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().size() != 2) throw usage_error{"expected SOURCE and OUT.safetensors or OUT.gguf"};
        if (auto d = p.value("--dtype")) {
            const std::string v(*d);
            if (v == "float32" || v == "F32") o.dequantize_to = dtype::F32;
            else if (v == "float16" || v == "F16") o.dequantize_to = dtype::F16;
            else if (v == "bfloat16" || v == "BF16") o.dequantize_to = dtype::BF16;
            else throw usage_error{"--dtype " + v + ": float32, float16 or bfloat16"};
        }
        o.split_max_bytes = p.size_or("--split-max-size", 0);
        o.split_max_tensors = p.uint_or("--split-max-tensors", 0);
        if ((o.split_max_bytes || o.split_max_tensors) && !gguf_target(std::string(p.positional()[1])))
            throw usage_error{"--split-max-size and --split-max-tensors split a GGUF OUT (OUT.gguf)"};
        o.max_shard_bytes = p.size_or("--max-shard-size", 0);
        if (o.max_shard_bytes && gguf_target(std::string(p.positional()[1])))
            throw usage_error{"--max-shard-size shards a safetensors OUT; a GGUF OUT splits by --split-max-size"};
        o.buf_size = p.size_or("--buffer", o.buf_size);
        o.nbufs = p.uint_or("--buffers", o.nbufs);
        if (o.buf_size < min_buffer || o.buf_size > max_buffer)
            throw usage_error{"--buffer " + *p.value("--buffer") + ": a buffer must hold 1M to 16G"};
        o.buf_size = (o.buf_size + page - 1) / page * page;
        if (o.nbufs < 2 || o.nbufs > max_buffers)
            throw usage_error{"--buffers " + *p.value("--buffers") +
                              ": need 2 to 1024 buffers (one being written, one being read)"};
        const long pages = ::sysconf(_SC_PHYS_PAGES), psize = ::sysconf(_SC_PAGESIZE);
        const std::uint64_t ram = pages > 0 && psize > 0 ? static_cast<std::uint64_t>(pages) * psize : 0;
        if (ram && o.nbufs * o.buf_size > ram / 2)
            throw usage_error{"--buffers " + std::to_string(o.nbufs) + " x --buffer " + human_bytes(o.buf_size) +
                              " = " + human_bytes(o.nbufs * o.buf_size) + ", more than half of this machine's " +
                              human_bytes(ram) + " of memory"};
        apply_http_flags(p, o.http);
        apply_header_limit(p, o.parse);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe cp: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    o.src = p.positional()[0];
    o.out = p.positional()[1];
    o.patterns = p.values("--select");
    o.direct = !p.has("--no-direct");
    o.sync = !p.has("--no-sync");
    o.json = p.has("--json");
    stop_on_signals guard;
    try {
        auto res = copy(o);
        if (res.interrupted) return interrupted(o.out);
        const double gbps = res.seconds > 0 ? res.bytes / res.seconds / 1e9 : 0.0;
        if (o.json)
            std::printf(
                "{\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.4f,\"peak_rss_kib\":%llu,\"buffers\":%zu,"
                "\"buffer_bytes\":%llu,\"readers\":%u,\"write_waited_seconds\":%.6f,\"read_waited_seconds\":%.6f}\n",
                static_cast<unsigned long long>(res.bytes), res.seconds, gbps, peak_rss_kib(), res.buffers,
                static_cast<unsigned long long>(res.buffer_bytes), res.readers, res.write_waited, res.read_waited);
        else
            std::printf("copied %zu tensors, %s in %.3f s (%.2f GB/s) to %s\n", res.tensors,
                        human_bytes(res.bytes).c_str(), res.seconds, gbps, terminal_text(o.out).c_str());
        return exit_ok;
    } catch (...) {
        if (stop_signal) return interrupted(o.out);
        report_failure("ringsafe cp", current_failure(), "", o.json);
        return exit_invalid;
    }
}

command_registration reg{"cp", "copy a selection of a checkpoint into a new file (read/write pipeline)", &run};

}  // namespace

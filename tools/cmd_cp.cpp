// `ringsafe cp`: the front end of ringsafe::convert_file (the read/write
// pipeline, engine/convert/): parses the options, turns SIGINT/SIGTERM into
// the pipeline's cancel flag, draws the progress bar and prints the result.
// An error, SIGINT or SIGTERM leaves nothing at OUT.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "progress_bar.hpp"
#include "ringsafe/convert.hpp"
#include "ringsafe/stores.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

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

// Set by SIGINT/SIGTERM: the pipeline stops, nothing is published.
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
    convert_options o;
    bool json = false;
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
        o.split_max_size = p.size_or("--split-max-size", 0);
        o.split_max_tensors = p.uint_or("--split-max-tensors", 0);
        if ((o.split_max_size || o.split_max_tensors) && !gguf_target(std::string(p.positional()[1])))
            throw usage_error{"--split-max-size and --split-max-tensors split a GGUF OUT (OUT.gguf)"};
        o.max_shard_size = p.size_or("--max-shard-size", 0);
        if (o.max_shard_size && gguf_target(std::string(p.positional()[1])))
            throw usage_error{"--max-shard-size shards a safetensors OUT; a GGUF OUT splits by --split-max-size"};
        o.buffer_size = p.size_or("--buffer", o.buffer_size);
        o.buffers = p.uint_or("--buffers", o.buffers);
        if (o.buffer_size < convert_min_buffer || o.buffer_size > convert_max_buffer)
            throw usage_error{"--buffer " + *p.value("--buffer") + ": a buffer must hold 1M to 16G"};
        o.buffer_size = (o.buffer_size + page - 1) / page * page;
        if (o.buffers < 2 || o.buffers > convert_max_buffers)
            throw usage_error{"--buffers " + *p.value("--buffers") +
                              ": need 2 to 1024 buffers (one being written, one being read)"};
        const long pages = ::sysconf(_SC_PHYS_PAGES), psize = ::sysconf(_SC_PAGESIZE);
        const std::uint64_t ram = pages > 0 && psize > 0 ? static_cast<std::uint64_t>(pages) * psize : 0;
        if (ram && o.buffers * o.buffer_size > ram / 2)
            throw usage_error{"--buffers " + std::to_string(o.buffers) + " x --buffer " + human_bytes(o.buffer_size) +
                              " = " + human_bytes(o.buffers * o.buffer_size) + ", more than half of this machine's " +
                              human_bytes(ram) + " of memory"};
        apply_http_flags(p, o.read.source.http, o.read.source.stores);
        apply_header_limit(p, o.read.parse);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe cp: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    const std::string src(p.positional()[0]), out(p.positional()[1]);
    o.select = p.values("--select");
    o.direct = !p.has("--no-direct");
    o.sync = !p.has("--no-sync");
    json = p.has("--json");
    apply_environment_credentials(src, o.read.source.http);  // HF_TOKEN for the Hub
    stop_on_signals guard;
    std::optional<progress_bar> bar;  // made at the first report, when the total is known
    read_control ctl;
    ctl.cancel = &stop_requested;
    ctl.on_progress = [&](std::uint64_t done, std::uint64_t total) {
        if (!bar) bar.emplace(total, !json && stderr_is_tty());
        bar->update(done);
    };
    try {
        auto res = convert_file(src, out, o, ctl);
        if (bar) bar->finish();
        bar.reset();
        const double gbps = res.seconds > 0 ? res.bytes / res.seconds / 1e9 : 0.0;
        if (json)
            std::printf(
                "{\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.4f,\"peak_rss_kib\":%llu,\"buffers\":%zu,"
                "\"buffer_bytes\":%llu,\"readers\":%u,\"write_waited_seconds\":%.6f,\"read_waited_seconds\":%.6f}\n",
                static_cast<unsigned long long>(res.bytes), res.seconds, gbps, peak_rss_kib(), res.buffers,
                static_cast<unsigned long long>(res.buffer_bytes), res.readers, res.write_waited, res.read_waited);
        else
            std::printf("copied %zu tensors, %s in %.3f s (%.2f GB/s) to %s\n", res.tensors,
                        human_bytes(res.bytes).c_str(), res.seconds, gbps, terminal_text(out).c_str());
        return exit_ok;
    } catch (...) {
        bar.reset();  // the bar's line ends before the message
        if (stop_signal) return interrupted(out);
        report_failure("ringsafe cp", current_failure(), "", json);
        return exit_invalid;
    }
}

command_registration reg{"cp", "copy a selection of a checkpoint into a new file (read/write pipeline)", &run};

}  // namespace

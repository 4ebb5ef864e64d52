// `ringsafe load`: reads a checkpoint (or a selection of it) into memory and
// reports the throughput.
#include <chrono>
#include <cstdio>
#include <string>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "progress_bar.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

constexpr std::string_view help =
    "usage: ringsafe load SOURCE [--select PATTERN]... [--direct] [--qd N] [--chunk SIZE]\n"
    "                     [--threads N] [--mode auto|hot|cold] [--pages huge|small] [--json]\n"
    "                     [--max-header-size BYTES] [--connections N] [--http-threads N]\n"
    "                     [--cross-origin-header NAME]... [--allow-downgrade]\n"
    "                     [--speed-limit BYTES] [--speed-time SECONDS] [--cache]\n"
    "Loads the tensors of SOURCE (a safetensors or GGUF file by path or http(s)://,\n"
    "s3://, gs://, az:// or hf:// URL, a sharded *.index.json, or a part of a\n"
    "split GGUF set, which loads the whole set) into memory and prints bytes,\n"
    "seconds and GB/s (GB = 1e9 bytes). GGUF block types are loaded as their\n"
    "raw blocks.\n"
    "The destination is allocated and prefaulted before the clock starts, as a\n"
    "caller's buffers would be; the seconds cover opening the source, reading and\n"
    "validating the header(s), and all tensor reads.\n"
    "\n"
    "  --select PATTERN  only tensors matching the glob (fnmatch: * ? [..] [!..]);\n"
    "                    repeatable, a tensor matching any is loaded\n"
    "  --direct          O_DIRECT reads (bypass the page cache)\n"
    "  --qd N            reads in flight per ring (default 32)\n"
    "  --chunk SIZE      split reads into chunks of SIZE, 4K..1G (files: default 4M;\n"
    "                    URLs: bytes per Range request, default $RINGSAFE_CHUNK, else 32M)\n"
    "  --connections N   URL sources: connections per origin, 1..256 (default\n"
    "                    $RINGSAFE_CONNECTIONS, else 32)\n"
    "  --http-threads N  URL sources: event loops (threads) of a read, 1..256\n"
    "                    (default $RINGSAFE_HTTP_THREADS, else the CPU count;\n"
    "                    at most the connections)\n"
    "  --cross-origin-header NAME  URL sources: keep sending header NAME after a\n"
    "                    redirect to another origin; repeatable (default: none)\n"
    "  --allow-downgrade URL sources: follow redirects from https to http\n"
    "  --speed-limit BYTES  URL sources: a response averaging under BYTES/s over\n"
    "                    --speed-time is dropped and resumed (default 1K; 0: off)\n"
    "  --speed-time SECONDS  URL sources: the window of --speed-limit (default 30)\n"
    "  --cache           hf:// sources: write the files read into the Hub cache\n"
    "                    ($HF_HUB_CACHE, else $HF_HOME/hub), each once all of it was\n"
    "                    read (files there are read with no request)\n"
    "  --no-verify       hf:// sources: do not check the bytes read against the\n"
    "                    sha256 (or git blob id) the Hub names the file by\n"
    "                    (those written with --cache always are)\n"
    "  --threads N       worker rings/threads (default 2)\n"
    "  --mode MODE       buffered reads: auto (default: asks the kernel how much of\n"
    "                    the selection is in the page cache), hot (any order, io-wq\n"
    "                    copies) or cold (one sequential stream per ring)\n"
    "  --pages KIND      destination pages: huge (default; THP) or small (4 KiB)\n"
    "  --json            print one line {\"bytes\":N,\"seconds\":S,\"gbps\":G}; on failure\n"
    "                    {\"ok\":false,\"error_kind\":\"<kind>\",\"error\":\"<message>\"}\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    "  -h, --help        this text\n"
    "\n"
    "A progress bar is drawn on stderr when it is a terminal (not with --json).\n"
    "Exit status: 0 loaded, 1 failed (unreadable, invalid, no tensor matched), 2 bad usage.\n";

// Where each selected tensor goes in the destination: packed in selection
// order, each tensor placed at the same offset modulo 4096 as in its file, so
// O_DIRECT reads land straight in the buffer and neighbours in the file stay
// neighbours in memory (their reads coalesce). Walked one tensor at a time, so
// that nothing per tensor is kept for a header of millions of tensors.
class layout {
public:
    explicit layout(const reader& r) : r_(r) {}
    // The offset of the next tensor (index `i` of the reader) in the destination.
    std::uint64_t place(std::uint32_t i) {
        constexpr std::uint64_t page = 4096;
        const tensor_info& t = r_.tensors()[i];
        const std::uint64_t want = (r_.shards()[r_.shard_of(i)].data_start + t.begin) % page;
        pos_ += (want + page - pos_ % page) % page;
        const std::uint64_t at = pos_;
        pos_ += t.size();
        return at;
    }
    std::uint64_t size() const noexcept { return pos_; }  // bytes needed so far

private:
    const reader& r_;
    std::uint64_t pos_ = 0;
};

// Tensors per plan: a selection of millions of tiny tensors is read in
// batches, so the plan's bookkeeping stays bounded; real checkpoints fit in one.
constexpr std::size_t tensors_per_plan = 1u << 16;

selection choose(const reader& r, const std::vector<std::string>& patterns) {
    if (patterns.empty()) return r.all();
    for (auto& p : patterns)
        if (r.select_glob(p).empty())
            raise(errc::TensorNotFound, "--select '" + p + "' matches no tensor in " + r.spec());
    return r.select_glob(patterns);
}

int run(const std::vector<std::string_view>& args) {
    arg_parser ap(args);
    for (auto f : {"--direct", "--json", "--help", "-h"}) ap.flag(f);
    for (auto o : {"--select", "--qd", "--chunk", "--threads", "--mode", "--pages"}) ap.option(o);
    declare_http_flags(ap, false);  // --chunk is declared above: it sets the file, plan and HTTP chunk
    declare_header_limit(ap);
    reader_options opts;
    bool json = false;
    std::vector<std::string> patterns;
    buffer_options bopts;
    std::string spec, mode_name;
    try {
        ap.parse();
        if (ap.has("--help") || ap.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (ap.positional().size() != 1) throw usage_error{"expected exactly one SOURCE"};
        spec = ap.positional()[0];
        apply_environment_credentials(spec, opts.source.http);  // HF_TOKEN for the Hub
        json = ap.has("--json");
        patterns = ap.values("--select");
        auto& f = opts.source.file;
        f.direct = ap.has("--direct");
        f.queue_depth = static_cast<unsigned>(ap.uint_or("--qd", f.queue_depth));
        f.threads = static_cast<unsigned>(ap.uint_or("--threads", f.threads));
        f.chunk_size = ap.size_or("--chunk", f.chunk_size);
        if (f.queue_depth == 0 || f.threads == 0 || f.chunk_size == 0)
            throw usage_error{"--qd, --threads and --chunk must be at least 1"};
        apply_http_flags(ap, opts.source.http, opts.source.stores);  // --connections, --http-threads
        apply_header_limit(ap, opts.parse);
        if (ap.has("--chunk")) {
            if (f.chunk_size < min_http_chunk_size || f.chunk_size > max_http_chunk_size)
                throw usage_error{"--chunk " + *ap.value("--chunk") + " is out of range 4K..1G"};
            opts.source.http.chunk_size = opts.plan.chunk_size = f.chunk_size;
        }
        const std::string mode = mode_name = ap.value("--mode").value_or("auto");
        using buffered = file_options::buffered_mode;
        if (mode == "auto") f.mode = buffered::automatic;
        else if (mode == "hot") f.mode = buffered::hot;
        else if (mode == "cold") f.mode = buffered::cold;
        else throw usage_error{"--mode takes auto, hot or cold, not '" + mode + "'"};
        std::string pages = ap.value("--pages").value_or("huge");
        if (pages == "huge") bopts.pages = page_kind::huge;
        else if (pages == "small") bopts.pages = page_kind::small;
        else throw usage_error{"--pages takes huge or small, not '" + pages + "'"};
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe load: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    try {
        // Untimed: learn the selection's size and prepare the destination.
        std::uint64_t need = 0;
        {
            reader probe = reader::open(spec, opts);
            layout place(probe);
            const selection chosen = choose(probe, patterns);
            for (auto i : chosen.indices()) place.place(i);
            need = place.size();
        }
        bopts.prefault = true;
        host_buffer dst(need, bopts);

        // Timed: open, header(s), plan, every read.
        const auto t0 = std::chrono::steady_clock::now();
        reader r = reader::open(spec, opts);
        selection sel = choose(r, patterns);
        progress_bar bar(sel.bytes(), !json && stderr_is_tty());
        std::uint64_t before = 0;  // bytes of the batches done
        read_control ctl;
        ctl.on_progress = [&bar, &before](std::uint64_t done, std::uint64_t) { bar.update(before + done); };
        layout place(r);
        std::vector<std::span<std::byte>> dsts;
        const auto all = sel.indices();
        for (std::size_t k = 0; k < all.size(); k += tensors_per_plan) {
            const auto batch = all.subspan(k, std::min(tensors_per_plan, all.size() - k));
            dsts.clear();
            for (auto i : batch) {
                const std::uint64_t at = place.place(i), size = r.tensors()[i].size();
                if (place.size() > dst.size()) raise(errc::ObjectChanged, spec + " changed between sizing and loading");
                dsts.push_back(dst.span(at, size));
            }
            const selection part = batch.size() == all.size() ? sel : r.select_indices(batch);
            r.execute(r.plan(part, dsts), ctl);
            before += part.bytes();
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bar.finish();

        const double gbps = secs > 0 ? static_cast<double>(sel.bytes()) / secs / 1e9 : 0;
        if (json) {
            std::printf("{\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.3f}\n",
                        static_cast<unsigned long long>(sel.bytes()), secs, gbps);
        } else {
            std::printf("loaded %zu tensors, %llu bytes (%s) in %.3f s: %.2f GB/s\n", sel.size(),
                        static_cast<unsigned long long>(sel.bytes()), human_bytes(sel.bytes()).c_str(), secs,
                        gbps);
            std::printf("destination: %s, %s\n", dst.pages().label().c_str(),
                        opts.source.file.direct ? "O_DIRECT" : ("buffered, --mode " + mode_name).c_str());
        }
        return exit_ok;
    } catch (...) {
        report_failure("ringsafe load", current_failure(), spec, json);
    }
    return exit_invalid;
}

command_registration reg{"load", "load tensors into memory and report GB/s", &run};

}  // namespace

// `ls` / `verify`: arguments, reading, output, exit status.
#include "listing_command.hpp"

#include <cstdio>
#include <optional>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "gguf_listing.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "tensor_hashes.hpp"
#include "tensor_listing.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {

int run_listing(const std::vector<std::string_view>& args, bool hash_data, std::string_view help) {
    arg_parser p(args);
    p.flag("--json");
    p.flag("--one-file");
    p.flag("--help");
    p.flag("-h");
    declare_header_limit(p);
    declare_http_flags(p);
    reader_options ro;
    parse_options opts;
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().size() != 1)
            throw usage_error{p.positional().empty() ? "missing SOURCE" : "expected one SOURCE"};
        apply_header_limit(p, opts);
        // verify: a file found in the Hub cache is hashed against its blob's name too.
        if (hash_data) ro.source.stores.hub.verify = hub_options::verification::always;
        apply_http_flags(p, ro.source.http, ro.source.stores);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    const bool as_json = p.has("--json");
    const std::string& source = p.positional()[0];
    try {
        // Through the reader, so URLs and sharded *.index.json work too.
        ro.parse = opts;
        ro.gguf_split_set = !p.has("--one-file");
        apply_environment_credentials(source, ro.source.http);  // HF_TOKEN for the Hub
        reader file = reader::open(source, ro);
        const listing l = listing_of(file);
        std::optional<digest_store> sums;
        if (hash_data) sha256_per_tensor(file, sums.emplace(l.tensors.size()));
        digest_store* digests = sums ? &*sums : nullptr;
        const bool gguf = file.format() == file_format::gguf;
        if (as_json) gguf ? print_gguf_json(stdout, file, digests) : print_listing_json(stdout, l, digests);
        else gguf ? print_gguf_table(stdout, file, digests) : print_listing_table(stdout, l, digests);
        return std::fflush(stdout) == 0 ? exit_ok : exit_invalid;
    } catch (...) {
        report_failure("ringsafe", current_failure(), source, as_json);
    }
    return exit_invalid;
}

}  // namespace ringsafe::cli

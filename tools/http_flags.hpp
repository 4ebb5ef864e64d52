// --connections N, --http-threads N, --chunk SIZE, --cross-origin-header NAME,
// --allow-downgrade, --speed-limit BYTES, --speed-time SECONDS, --endpoint-url URL,
// --anonymous, --cache and --no-verify: the options of URL sources shared by the subcommands
// that read (load, get, cp, ls, verify).
#pragma once

#include <string_view>

#include "args.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::cli {

// Help lines for the options (and the environment variables behind
// them): a string literal, to be concatenated into a subcommand's help.
#define RINGSAFE_CLI_HTTP_FLAGS_HELP                                              \
    "  --connections N    URL sources: connections per origin, 1..256 (default:\n" \
    "                     $RINGSAFE_CONNECTIONS, else 32)\n"                      \
    "  --http-threads N   URL sources: event loops (threads) of a read, 1..256\n"   \
    "                     (default: $RINGSAFE_HTTP_THREADS, else the CPU count;\n" \
    "                     at most the connections)\n"                               \
    "  --chunk SIZE       URL sources: bytes per Range request, 4K..1G (default:\n" \
    "                     $RINGSAFE_CHUNK, else 32M; 8M, 64M accepted)\n"       \
    "  --cross-origin-header NAME  URL sources: keep sending header NAME (e.g.\n"   \
    "                     Authorization, for $HF_TOKEN) after a redirect to another\n" \
    "                     origin; repeatable (default: none follows)\n"              \
    "  --allow-downgrade  URL sources: follow redirects from https to http\n"      \
    "  --speed-limit BYTES  URL sources: a response averaging under BYTES/s over\n" \
    "                     --speed-time is dropped and resumed (default 1K; 0: off)\n" \
    "  --speed-time SECONDS  URL sources: the window of --speed-limit (default 30)\n" \
    "  --endpoint-url URL  s3://, gs://, az://, hf:// sources: the store's endpoint (an\n" \
    "                     S3 or GCS XML API server, an Azure blob service URL such as\n" \
    "                     http://127.0.0.1:10000/devstoreaccount1, a Hub mirror);\n"   \
    "                     default: the store's environment variables, else its public\n" \
    "                     endpoint\n"                                                   \
    "  --anonymous        gs://, az:// sources: send no credentials (public buckets)\n" \
    "  --cache            hf:// sources: write the files read into the Hub cache\n"   \
    "                     ($HF_HUB_CACHE, else $HF_HOME/hub), each once all of it\n" \
    "                     was read (hf:// files there are read with no request;\n"   \
    "                     HF_HUB_OFFLINE=1: from there only)\n"                     \
    "  --no-verify        hf:// sources: do not check the bytes read against the\n"  \
    "                     sha256 (or git blob id) the Hub names the file by (those\n" \
    "                     written with --cache always are)\n"

// Declares --connections, --http-threads, --cross-origin-header, --allow-downgrade,
// --speed-limit, --speed-time, --endpoint-url, --anonymous, --cache, --no-verify and, when
// `chunk`, --chunk on `p`.
void declare_http_flags(arg_parser& p, bool chunk = true);

// Sets the given flags into `o` (the transport) and `st` (each store's options;
// a flag wins over the environment variable;
// an absent one leaves the field to the engine, which reads the variable).
// Throws usage_error naming the option and value when out of range.
void apply_http_flags(const arg_parser& p, http_options& o, store_options& st);

}  // namespace ringsafe::cli

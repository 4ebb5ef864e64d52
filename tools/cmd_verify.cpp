// `ringsafe verify`: validates a checkpoint and hashes every tensor's bytes.
#include "command.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "listing_command.hpp"

namespace {

constexpr std::string_view help =
    "usage: ringsafe verify [--json] [--max-header-size BYTES] [--connections N]\n"
    "                       [--http-threads N] [--chunk SIZE] SOURCE\n"
    "Validates a safetensors file and reads every tensor's bytes (front to back,\n"
    "8 MiB at a time), printing each tensor with the SHA-256 of its bytes.\n"
    "SOURCE is a path, an http(s)://, s3://, gs://, az:// or hf:// URL, or a sharded\n"
    "*.index.json. An hf:// file is also checked against the hash the Hub names\n"
    "it by, one found in the Hub cache against its blob's name.\n"
    "\n"
    "  --json                  print one JSON object on stdout, as `ringsafe ls --json`\n"
    "                          with \"sha256\" (lowercase hex) added to each tensor\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help              this text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid or unreadable, 2 bad usage.\n";

int run(const std::vector<std::string_view>& args) { return ringsafe::cli::run_listing(args, true, help); }

ringsafe::cli::command_registration reg{"verify", "validate a checkpoint and hash every tensor", &run};

}  // namespace

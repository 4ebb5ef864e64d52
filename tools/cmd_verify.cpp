// `ringsafe verify`: validates a checkpoint and hashes every tensor's bytes.
#include "command.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "listing_command.hpp"

namespace {

constexpr std::string_view help =
    "usage: ringsafe verify [--json] [--one-file] [--max-header-size BYTES] [--connections N]\n"
    "                       [--http-threads N] [--chunk SIZE] SOURCE\n"
    "Validates a safetensors or GGUF file and reads every tensor's bytes (front to\n"
    "back, 8 MiB at a time), printing each tensor with the SHA-256 of its bytes (a\n"
    "GGUF block type's: of its raw blocks, as stored).\n"
    "SOURCE is a path, an http(s)://, s3://, gs://, az:// or hf:// URL, a sharded\n"
    "*.index.json, or a part of a split GGUF set (the whole set is verified).\n"
    "Without --json the output is `ringsafe ls`'s with a SHA256 column (GGUF: the\n"
    "model's architecture, name, parameters, quantization and context length first).\n"
    "An hf:// file is also checked against the hash the Hub names it by, one found\n"
    "in the Hub cache against its blob's name.\n"
    "\n"
    "  --json                  print one JSON object on stdout, as `ringsafe ls --json`\n"
    "                          with \"sha256\" (lowercase hex) added to each tensor\n"
    "  --one-file              a part of a split GGUF set: only that file\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help              this text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid or unreadable, 2 bad usage.\n";

int run(const std::vector<std::string_view>& args) { return ringsafe::cli::run_listing(args, true, help); }

ringsafe::cli::command_registration reg{"verify", "validate a checkpoint and hash every tensor", &run};

}  // namespace

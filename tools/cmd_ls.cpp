// `ringsafe ls`: lists a checkpoint's tensors from its header alone.
#include "command.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "listing_command.hpp"

namespace {

constexpr std::string_view help =
    "usage: ringsafe ls [--json] [--max-header-size BYTES] [--connections N]\n"
    "                       [--http-threads N] [--chunk SIZE] SOURCE\n"
    "Lists the tensors of a safetensors file in data order, reading only the\n"
    "8-byte length prefix and the header; the header is fully validated.\n"
    "SOURCE is a path, an http(s)://, s3://, gs:// or az:// URL, or a sharded\n"
    "*.index.json (every shard's header is read, in parallel, and checked against\n"
    "the index).\n"
    "\n"
    "  --json                  print one JSON object on stdout:\n"
    "                          {\"ok\":true,\"tensors\":[{\"name\",\"dtype\",\"shape\",\"data_offsets\"}...],\n"
    "                           \"metadata\":null|{...}}; on failure\n"
    "                          {\"ok\":false,\"error_kind\":\"<kind>\",\"error\":\"<message>\"}\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help              this text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid or unreadable, 2 bad usage.\n";

int run(const std::vector<std::string_view>& args) { return ringsafe::cli::run_listing(args, false, help); }

ringsafe::cli::command_registration reg{"ls", "list the tensors of a checkpoint (header only)", &run};

}  // namespace

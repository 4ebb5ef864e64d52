// `ringsafe ls`: lists a checkpoint's tensors from its header alone.
#include "command.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "listing_command.hpp"

namespace {

constexpr std::string_view help =
    "usage: ringsafe ls [--json] [--one-file] [--max-header-size BYTES] [--connections N]\n"
    "                       [--http-threads N] [--chunk SIZE] SOURCE\n"
    "Lists the tensors of a safetensors or GGUF file in data order, reading only\n"
    "the header (the format is told by the file's first bytes); the header is\n"
    "fully validated (GGUF: every check of ggml's reader).\n"
    "SOURCE is a path, an http(s)://, s3://, gs://, az:// or hf:// URL, a sharded\n"
    "*.index.json (every shard's header is read, in parallel, and checked against\n"
    "the index), or a part of a split GGUF set NAME-00001-of-00003.gguf (every part\n"
    "is read and checked as llama.cpp does, and the set listed as one model).\n"
    "GGUF output shows the architecture, name, parameter count, quantization and\n"
    "context length first, then the tensors and the metadata (long arrays cut).\n"
    "\n"
    "  --json                  print one JSON object on stdout; safetensors:\n"
    "                          {\"ok\":true,\"format\":\"safetensors\",\"tensors\":[{\"name\",\n"
    "                           \"dtype\",\"shape\",\"data_offsets\"}...],\"metadata\":null|{...}};\n"
    "                          GGUF: {\"ok\":true,\"format\":\"gguf\",\"version\",\"alignment\",\n"
    "                           \"data_offset\",\"metadata\":[{\"key\",\"type\",\"value\"}...],\n"
    "                           \"tensors\":[{\"name\",\"type\",\"shape\",\"ne\",\"offset\",\"nbytes\"}...],\n"
    "                           \"split\":null|{...}} (tools/README.md says every field);\n"
    "                          on failure {\"ok\":false,\"error_kind\":\"<kind>\",\"error\":\"<message>\"}\n"
    "  --one-file              a part of a split GGUF set: only that file\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help              this text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid or unreadable, 2 bad usage.\n";

int run(const std::vector<std::string_view>& args) { return ringsafe::cli::run_listing(args, false, help); }

ringsafe::cli::command_registration reg{"ls", "list the tensors of a checkpoint (header only)", &run};

}  // namespace

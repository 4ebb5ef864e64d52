// Subcommand registry of the ringsafe CLI: each tools/cmd_*.cpp registers one
// subcommand with a static `command_registration`.
#pragma once

#include <string_view>
#include <vector>

namespace ringsafe::cli {

// Exit statuses shared by every subcommand.
inline constexpr int exit_ok = 0;         // success / valid
inline constexpr int exit_invalid = 1;    // invalid or unreadable input, failed operation
inline constexpr int exit_usage = 2;      // bad usage

// A subcommand's entry point: args excludes the program and subcommand names.
using command_fn = int (*)(const std::vector<std::string_view>& args);

struct command {
    std::string_view name;
    std::string_view summary;  // one line for `ringsafe --help`
    command_fn run;
};

// Registers a subcommand at static-initialisation time.
struct command_registration {
    command_registration(std::string_view name, std::string_view summary, command_fn run);
};

// All registered subcommands, sorted by name.
const std::vector<command>& commands();

}  // namespace ringsafe::cli

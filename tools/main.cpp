// The ringsafe CLI: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {
namespace {
std::vector<command>& registry() {
    static std::vector<command> r;
    return r;
}
}  // namespace

command_registration::command_registration(std::string_view name, std::string_view summary,
                                           command_fn run) {
    auto& r = registry();
    r.push_back({name, summary, run});
    std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.name < b.name; });
}

const std::vector<command>& commands() { return registry(); }

}  // namespace ringsafe::cli

static void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: ringsafe COMMAND [ARGS]...\n"
                 "Moves safetensors and GGUF checkpoints between storage and memory.\n\ncommands:\n");
    for (auto& c : ringsafe::cli::commands())
        std::fprintf(out, "  %-8.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                     static_cast<int>(c.summary.size()), c.summary.data());
    std::fprintf(out, "\nRun 'ringsafe COMMAND --help' for a command's options.\n");
}

int main(int argc, char** argv) {
    using namespace ringsafe::cli;
    if (argc < 2) {
        print_help(stderr);
        return exit_usage;
    }
    std::string_view name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_help(stdout);
        return exit_ok;
    }
    std::vector<std::string_view> args(argv + 2, argv + argc);
    for (auto& c : commands())
        if (c.name == name) return c.run(args);
    std::fprintf(stderr, "ringsafe: unknown command '%s'\n\n", ringsafe::cli::terminal_text(name).c_str());
    print_help(stderr);
    return exit_usage;
}

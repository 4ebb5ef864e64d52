// `ringsafe edit FILE --set KEY=VALUE[:TYPE] --delete KEY`: a GGUF or
// safetensors file's metadata changed through ringsafe::edit_file
// (ringsafe/edit.hpp): in place, crash-safely, when the file has room, else
// by one pass into a temporary renamed over FILE. Prints which happened.
#include <cstdio>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "ringsafe/edit.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

constexpr std::string_view help =
    "usage: ringsafe edit FILE [--set KEY=VALUE[:TYPE]]... [--delete KEY]... [--rewrite]\n"
    "Changes the metadata of a local GGUF or safetensors file (told by its first\n"
    "bytes): --set adds or replaces KEY, --delete removes it (deletions first).\n"
    "GGUF: TYPE as gguf-py spells it: STRING, the default for a new key, UINT8..INT64,\n"
    "FLOAT32, FLOAT64, BOOL (true/false); a replaced key keeps its type unless TYPE\n"
    "is given. safetensors: __metadata__ string entries.\n"
    "When the file has room (the ringsafe.padding entry of a GGUF file, the spaces of\n"
    "a safetensors header) only header bytes are rewritten, in place, so that a crash\n"
    "leaves the old metadata or the new; otherwise (or with --rewrite) a new file is\n"
    "written in one pass beside FILE and renamed over it, with room for later edits.\n"
    "Prints which of the two happened.\n"
    "Exit status: 0 edited, 1 failed (FILE unchanged), 2 bad usage.\n";

// "KEY=VALUE[:TYPE]" as a change.
metadata_change parse_set(const std::string& arg) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) throw usage_error{"--set " + arg + ": expected KEY=VALUE[:TYPE]"};
    metadata_change c;
    c.key = arg.substr(0, eq);
    std::string value = arg.substr(eq + 1);
    if (const auto colon = value.rfind(':'); colon != std::string::npos) {
        if (auto t = gguf::value_type_from_name(value.substr(colon + 1))) {
            if (*t == gguf::value_type::ARRAY) throw usage_error{"--set " + c.key + ": arrays cannot be set from the command line"};
            c.type = t;
            value.resize(colon);
        }
    }
    c.value = std::move(value);
    return c;
}

int run(const std::vector<std::string_view>& args) {
    arg_parser p(args);
    for (auto f : {"--help", "-h", "--rewrite"}) p.flag(f);
    for (auto o : {"--set", "--delete"}) p.option(o);
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().size() != 1) throw usage_error{"expected one FILE (.gguf or .safetensors)"};
        if (p.values("--set").empty() && p.values("--delete").empty())
            throw usage_error{"nothing to do: give --set or --delete"};
        const std::string path = p.positional()[0];
        std::vector<metadata_change> changes;
        for (const std::string& key : p.values("--delete")) changes.push_back({key, std::nullopt, std::nullopt});
        for (const std::string& arg : p.values("--set")) changes.push_back(parse_set(arg));
        edit_options o;
        o.in_place = !p.has("--rewrite");
        const edit_result r = edit_file(path, changes, o);
        const char* verb = r.way == edit_way::in_place ? "edited" : r.way == edit_way::rewritten ? "rewrote" : "left";
        const char* how = r.way == edit_way::in_place ? " in place" : r.way == edit_way::rewritten ? "" : " unchanged";
        std::printf("%s %s%s (%s)\n", verb, terminal_text(path).c_str(), how, terminal_text(r.detail).c_str());
        return exit_ok;
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe edit: %s\n\n%.*s", terminal_text(e.message).c_str(),
                     static_cast<int>(help.size()), help.data());
        return exit_usage;
    } catch (...) {
        report_failure("ringsafe edit", current_failure(), "", false);
        return exit_invalid;
    }
}

command_registration reg{"edit", "change a GGUF or safetensors file's metadata (--set KEY=VALUE[:TYPE], --delete KEY)",
                         &run};

}  // namespace

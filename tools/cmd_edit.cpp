// `ringsafe edit FILE.gguf --set KEY=VALUE[:TYPE] --delete KEY`: a GGUF
// file's metadata changed by one pass that writes the new header and copies
// the data section behind it into a temporary beside FILE, renamed over it
// (gguf::declared_writer: the old file or the new one at FILE, never a mix).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "ringsafe/reader.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;
using gguf::metadata_entry;
using gguf::value_type;

constexpr std::string_view help =
    "usage: ringsafe edit FILE.gguf [--set KEY=VALUE[:TYPE]]... [--delete KEY]...\n"
    "Changes the metadata of a local GGUF file: --set adds or replaces KEY (TYPE as\n"
    "gguf-py spells it: STRING, the default for a new key, UINT8..INT64, FLOAT32,\n"
    "FLOAT64, BOOL (true/false); a replaced key keeps its type unless TYPE is\n"
    "given); --delete removes KEY. The new file is written in one pass (the new\n"
    "header, then the data section copied) to a temporary beside FILE and renamed\n"
    "over it: a crash leaves the old file or the new one. Prints what happened.\n"
    "Exit status: 0 edited, 1 failed (FILE unchanged), 2 bad usage.\n";

// "KEY=VALUE[:TYPE]" as an entry; `old` is the entry it replaces, if any.
metadata_entry parse_set(const std::string& arg, const metadata_entry* old) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) throw usage_error{"--set " + arg + ": expected KEY=VALUE[:TYPE]"};
    const std::string key = arg.substr(0, eq);
    std::string value = arg.substr(eq + 1);
    std::optional<value_type> type;
    if (const auto colon = value.rfind(':'); colon != std::string::npos) {
        if (auto t = gguf::value_type_from_name(value.substr(colon + 1))) {
            type = t;
            value.resize(colon);
        }
    }
    if (!type) type = old && !old->is_array() ? old->type : value_type::STRING;
    const value_type t = *type;
    if (t == value_type::ARRAY) throw usage_error{"--set " + key + ": arrays cannot be set from the command line"};
    if (t == value_type::STRING) return metadata_entry::make(key, t, std::string_view(value));
    if (t == value_type::BOOL) {
        if (value != "true" && value != "false") throw usage_error{"--set " + key + ": a BOOL is true or false"};
        return metadata_entry::make(key, t, value == "true");
    }
    try {
        std::size_t used = 0;
        gguf::scalar v;
        if (t == value_type::FLOAT32 || t == value_type::FLOAT64) v = std::stod(value, &used);
        else if (value.starts_with('-')) v = static_cast<std::int64_t>(std::stoll(value, &used));
        else v = static_cast<std::uint64_t>(std::stoull(value, &used));
        if (used != value.size()) throw std::invalid_argument("trailing text");
        if (auto* u = std::get_if<std::uint64_t>(&v); u && t != value_type::UINT8 && t != value_type::UINT16 &&
                                                      t != value_type::UINT32 && t != value_type::UINT64) {
            if (*u > static_cast<std::uint64_t>(INT64_MAX)) throw std::out_of_range("too large");
            v = static_cast<std::int64_t>(*u);
        }
        return metadata_entry::make(key, t, v);
    } catch (const std::logic_error&) {
        throw usage_error{"--set " + key + ": '" + value + "' is not a " + std::string(gguf::value_type_name(t))};
    }
}

void edit(const std::string& path, const std::vector<std::string>& sets, const std::vector<std::string>& deletes) {
    auto r = reader::open(path);
    const gguf::header* h = r.gguf();
    if (!h) raise(errc::InvalidArgument, "'" + path + "' is not a GGUF file");
    if (r.shards().size() != 1) raise(errc::InvalidArgument, "'" + path + "' is part of a split set: edit one part file");
    std::vector<metadata_entry> md;
    for (const metadata_entry& e : h->metadata)
        if (e.key != gguf::padding_key) md.push_back(e);
    for (const std::string& key : deletes) {
        auto it = std::find_if(md.begin(), md.end(), [&](const metadata_entry& e) { return e.key == key; });
        if (it == md.end()) raise(errc::InvalidArgument, "--delete " + key + ": '" + path + "' has no such key");
        md.erase(it);
    }
    for (const std::string& arg : sets) {
        const std::string key = arg.substr(0, arg.find('='));
        auto it = std::find_if(md.begin(), md.end(), [&](const metadata_entry& e) { return e.key == key; });
        metadata_entry e = parse_set(arg, it == md.end() ? nullptr : &*it);
        if (it == md.end()) md.push_back(std::move(e));
        else *it = std::move(e);
    }
    gguf::writer_options o;
    o.alignment = h->alignment;
    auto tensors = r.tensors();  // the reader holds them (h->tensors is empty)
    std::vector<gguf::tensor_record> records;
    for (const tensor_info& t : tensors) records.push_back({t.name, t.ggml, gguf::ne_of(t)});
    const std::uint64_t data_start = r.shards()[0].data_start;
    gguf::declared_writer w(path, md, std::move(records), o);
    // The data section as it is: each tensor's bytes, in pieces of at most 8 MiB.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) raise_errno(errno, "opening '" + path + "'", path);
    std::vector<std::byte> buf(8u << 20);
    try {
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            const tensor_info& t = tensors[i];
            for (std::uint64_t off = 0; off < t.size();) {
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), t.size() - off));
                const ssize_t got = ::pread(fd, buf.data(), n, static_cast<off_t>(data_start + t.begin + off));
                if (got < 0 && errno == EINTR) continue;
                if (got <= 0) raise_errno(got < 0 ? errno : EIO, "reading tensor '" + t.name + "' of '" + path + "'", path);
                w.write(i, off, std::span(buf.data(), static_cast<std::size_t>(got)));
                off += static_cast<std::uint64_t>(got);
            }
        }
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    w.finish();
}

int run(const std::vector<std::string_view>& args) {
    arg_parser p(args);
    for (auto f : {"--help", "-h"}) p.flag(f);
    for (auto o : {"--set", "--delete"}) p.option(o);
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().size() != 1) throw usage_error{"expected one FILE.gguf"};
        if (p.values("--set").empty() && p.values("--delete").empty())
            throw usage_error{"nothing to do: give --set or --delete"};
        const std::string path = p.positional()[0];
        edit(path, p.values("--set"), p.values("--delete"));
        std::printf("rewrote %s (one pass: a new file renamed over it)\n", terminal_text(path).c_str());
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

command_registration reg{"edit", "change a GGUF file's metadata (--set KEY=VALUE[:TYPE], --delete KEY)", &run};

}  // namespace

// `ringsafe get`: writes named tensors out as .npy (or raw .bin) files.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "header_limit_flag.hpp"
#include "http_flags.hpp"
#include "npy_output.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "tensor_listing.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

constexpr std::string_view help =
    "usage: ringsafe get SOURCE NAME... -o DIR [--max-header-size BYTES] [--connections N]\n"
    "                     [--http-threads N] [--chunk SIZE]\n"
    "Reads the named tensors of SOURCE (a safetensors or GGUF file by path or URL,\n"
    "a sharded *.index.json, a part of a split GGUF set) and writes each to DIR\n"
    "(created if missing) as NAME.npy when numpy has the dtype (BOOL U8 I8 I16 U16\n"
    "F16 I32 U32 F32 F64 I64 U64, C64 as complex64; GGUF's F32 F16 F64 I8..I64), or\n"
    "as NAME.bin holding the raw little-endian bytes otherwise (BF16, F8_*, F6_*, F4).\n"
    "A tensor of a GGUF block type (Q4_0, Q4_K, IQ4_XS, MXFP4, ...) is written as\n"
    "NAME.bin holding its raw blocks, as the file stores them (not dequantized).\n"
    "File names are the tensor names with every byte other than A-Z a-z 0-9 . _ -\n"
    "replaced by '_' (and a '_' before a leading '.'); two tensors that map to the\n"
    "same file name are refused. Each file is written under a temporary name and\n"
    "renamed into place, so a failed run leaves no partial file at a target path.\n"
    "\n"
    "  -o, --output DIR   where to write (required)\n"
    RINGSAFE_CLI_MAX_HEADER_SIZE_HELP
    RINGSAFE_CLI_HTTP_FLAGS_HELP
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 written, 1 failed (unreadable, invalid, tensor not found), 2 bad usage.\n";

// Writes `parts` to `path` through a temporary file in the same directory.
void write_atomically(const std::filesystem::path& path, std::string_view head,
                      std::span<const std::byte> data) {
    std::string base(".");
    base.append(path.filename().string()).append(".tmp-XXXXXX");
    std::string tmp = (path.parent_path() / base).string();
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) raise_errno(errno, "create a temporary file in " + path.parent_path().string());
    auto fail = [&](const std::string& what) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        raise_errno(err, what);
    };
    auto put = [&](const void* p, std::size_t n) {
        const char* c = static_cast<const char*>(p);
        while (n) {
            ssize_t w = ::write(fd, c, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) fail("write " + tmp);
            c += w;
            n -= static_cast<std::size_t>(w);
        }
    };
    put(head.data(), head.size());
    put(data.data(), data.size());
    if (::fchmod(fd, 0644) != 0 || ::close(fd) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        raise_errno(err, "finish " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        raise_errno(err, "rename " + tmp + " to " + path.string());
    }
}

int run(const std::vector<std::string_view>& args) {
    arg_parser ap(args);
    for (auto f : {"--help", "-h"}) ap.flag(f);
    for (auto o : {"-o", "--output"}) ap.option(o);
    declare_http_flags(ap);
    declare_header_limit(ap);
    reader_options opts;
    std::string spec, out;
    std::vector<std::string> names;
    try {
        ap.parse();
        if (ap.has("--help") || ap.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (ap.positional().size() < 2) throw usage_error{"expected SOURCE and at least one NAME"};
        auto o = ap.value("-o");
        if (auto o2 = ap.value("--output")) o = o2;
        if (!o || o->empty()) throw usage_error{"-o DIR is required"};
        out = *o;
        spec = ap.positional()[0];
        names.assign(ap.positional().begin() + 1, ap.positional().end());
        apply_http_flags(ap, opts.source.http, opts.source.stores);
        apply_header_limit(ap, opts.parse);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe get: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    try {
        apply_environment_credentials(spec, opts.source.http);  // HF_TOKEN for the Hub
        reader r = reader::open(spec, opts);
        selection sel = r.select(names);
        std::map<std::string, std::string> files;  // file name -> tensor
        std::vector<std::string> targets;
        for (auto i : sel.indices()) {
            const tensor_info& t = r.tensors()[i];
            std::string f = file_name_for(t.name) + (!t.quantized() && npy_descr(t.dtype) ? ".npy" : ".bin");
            auto [it, fresh] = files.emplace(f, t.name);
            if (!fresh)
                raise(errc::InvalidArgument, "tensors '" + it->second + "' and '" + t.name +
                                                 "' would both be written to " + f);
            targets.push_back(f);
        }
        std::filesystem::create_directories(out);
        for (std::size_t k = 0; k < sel.size(); ++k) {
            const tensor_info& t = r.tensors()[sel.indices()[k]];
            std::vector<std::byte> data(t.size());
            std::vector<std::span<std::byte>> dst{data};
            r.read(r.select({t.name}), dst);
            auto descr = t.quantized() ? std::nullopt : npy_descr(t.dtype);
            std::string head = descr ? npy_header(*descr, t.shape) : std::string();
            auto path = std::filesystem::path(out) / targets[k];
            write_atomically(path, head, data);
            std::printf("%s: %s %s, %llu bytes%s\n", terminal_text(path.string()).c_str(), type_text(t).c_str(),
                        terminal_text(t.name).c_str(), static_cast<unsigned long long>(t.size()),
                        t.quantized() ? " of raw blocks" : "");
        }
        return exit_ok;
    } catch (...) {
        report_failure("ringsafe get", current_failure(), spec, false);
    }
    return exit_invalid;
}

command_registration reg{"get", "write tensors out as .npy / raw files", &run};

}  // namespace

// `ringsafe pack`: builds a safetensors file from .npy files and raw byte files
// with the streaming writer (inputs are mapped and written without a copy
// where alignment allows).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "args.hpp"
#include "command.hpp"
#include "failure_report.hpp"
#include "npy_input.hpp"
#include "progress_bar.hpp"
#include "ringsafe/writer.hpp"
#include "terminal_text.hpp"

namespace {

using namespace ringsafe;
using namespace ringsafe::cli;

constexpr std::string_view help =
    "usage: ringsafe pack OUT.safetensors INPUT... [--raw NAME:DTYPE:SHAPE:PATH]...\n"
    "Writes the inputs, in the order given, into a new safetensors file with the\n"
    "streaming writer. Nothing appears at OUT unless every input was written.\n"
    "\n"
    "  INPUT                         a .npy file (v1/v2/v3, C order, little-endian);\n"
    "                                the tensor is named after the file's stem\n"
    "  --raw NAME:DTYPE:SHAPE:PATH   raw bytes from PATH, e.g. w:F32:4x4096:w.bin\n"
    "                                (SHAPE: dims joined by 'x' or ','; empty = scalar)\n"
    "  --metadata KEY=VALUE          a __metadata__ entry (repeatable)\n"
    "  --no-direct                   buffered writes instead of O_DIRECT\n"
    "  --no-sync                     skip fsync of the file and directory\n"
    "  -h, --help                    this text\n"
    "\n"
    "A progress bar is drawn on stderr when it is a terminal.\n"
    "Exit status: 0 written, 1 failed (nothing at OUT), 2 bad usage.\n";

// A read-only mapping of a whole input file, shared with the writer until its
// writes from it complete.
struct mapped_file {
    void* base = MAP_FAILED;
    std::size_t size = 0;
    ~mapped_file() {
        if (base != MAP_FAILED && size) ::munmap(base, size);
    }
};

std::shared_ptr<mapped_file> map_input(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) raise_errno(errno, "opening input '" + path + "'");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        raise_errno(e, "stat of input '" + path + "'");
    }
    auto m = std::make_shared<mapped_file>();
    m->size = static_cast<std::size_t>(st.st_size);
    if (m->size) {
        m->base = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (m->base == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            raise_errno(e, "mapping input '" + path + "'");
        }
    }
    ::close(fd);
    return m;
}

std::vector<std::uint64_t> parse_shape(std::string_view s, const std::string& spec) {
    std::vector<std::uint64_t> out;
    if (s.empty()) return out;
    std::string cur;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == 'x' || s[i] == ',') {
            if (cur.empty()) throw usage_error{"--raw " + spec + ": empty dimension in the shape"};
            std::uint64_t v = 0;
            for (char c : cur) {
                if (c < '0' || c > '9' || __builtin_mul_overflow(v, 10u, &v) ||
                    __builtin_add_overflow(v, std::uint64_t(c - '0'), &v))
                    throw usage_error{"--raw " + spec + ": bad dimension '" + cur + "'"};
            }
            out.push_back(v);
            cur.clear();
        } else {
            cur += s[i];
        }
    }
    return out;
}

int run(const std::vector<std::string_view>& args) {
    arg_parser p(args);
    p.flag("--help");
    p.flag("-h");
    p.flag("--no-direct");
    p.flag("--no-sync");
    p.option("--raw");
    p.option("--metadata");
    try {
        p.parse();
        if (p.has("--help") || p.has("-h")) {
            std::fwrite(help.data(), 1, help.size(), stdout);
            return exit_ok;
        }
        if (p.positional().empty()) throw usage_error{"missing OUT.safetensors"};
        if (p.positional().size() == 1 && p.values("--raw").empty()) throw usage_error{"no inputs"};
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe pack: %s\n\n%.*s", terminal_text(e.message).c_str(), static_cast<int>(help.size()),
                     help.data());
        return exit_usage;
    }
    const std::string out = p.positional()[0];
    try {
        metadata_map meta;
        for (auto& kv : p.values("--metadata")) {
            auto eq = kv.find('=');
            if (eq == std::string::npos) throw usage_error{"--metadata " + kv + ": expected KEY=VALUE"};
            meta[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
        writer_options o;
        o.direct = !p.has("--no-direct");
        o.sync = o.sync_dir = !p.has("--no-sync");
        o.expected_tensors = p.positional().size() + p.values("--raw").size();
        o.expected_metadata_bytes = 256;
        for (auto& [k, v] : meta) o.expected_metadata_bytes += 8 + k.size() * 6 + v.size() * 6;
        // The progress bar's total: the inputs' sizes (headers of .npy files included).
        std::uint64_t total = 0, done = 0;
        for (std::size_t i = 1; i < p.positional().size(); ++i) {
            struct stat st {};
            if (::stat(p.positional()[i].c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
        }
        for (auto& spec : p.values("--raw")) {
            struct stat st {};
            if (auto c = spec.rfind(':'); c != std::string::npos && ::stat(spec.c_str() + c + 1, &st) == 0)
                total += static_cast<std::uint64_t>(st.st_size);
        }
        progress_bar bar(total, stderr_is_tty());
        auto t0 = std::chrono::steady_clock::now();
        writer w(out, o);
        // Adds one tensor in 64 MiB appends (zero-copy from the mapping) so the bar moves within large inputs.
        auto add = [&](const std::string& name, dtype t, const std::vector<std::uint64_t>& shape,
                       std::span<const std::byte> bytes, const std::shared_ptr<mapped_file>& keep,
                       std::uint64_t input_size, const std::string& path) {
            constexpr std::size_t step = 64u << 20;
            std::uint64_t n = 1;
            for (auto d : shape)
                if (__builtin_mul_overflow(n, d, &n)) raise(errc::ValidationOverflow, "'" + path + "': shape overflows");
            auto need = dtype_bytes_for(t, n);
            if (!need || *need != bytes.size())
                raise(errc::TensorInvalidInfo, "'" + path + "' holds " + std::to_string(bytes.size()) +
                                                   " data bytes; its shape and dtype need " +
                                                   (need ? std::to_string(*need) : std::string("an invalid size")));
            w.begin(name, t, shape);
            for (std::size_t at = 0; at < bytes.size(); at += step) {
                w.append(bytes.subspan(at, std::min(step, bytes.size() - at)), keep);
                bar.update(done + at);
            }
            w.end();
            done += input_size;
            bar.update(done);
        };
        for (std::size_t i = 1; i < p.positional().size(); ++i) {
            const std::string& path = p.positional()[i];
            auto m = map_input(path);
            std::string_view head(static_cast<const char*>(m->base == MAP_FAILED ? nullptr : m->base), m->size);
            auto layout = parse_npy(head, path);
            auto name = std::filesystem::path(path).stem().string();
            const auto* data = static_cast<const std::byte*>(m->base) + layout.data_offset;
            std::size_t have = m->size - layout.data_offset;
            auto need = dtype_bytes_for(layout.dtype, [&] {
                std::uint64_t n = 1;
                for (auto d : layout.shape)
                    if (__builtin_mul_overflow(n, d, &n)) raise(errc::ValidationOverflow, "'" + path + "': shape overflows");
                return n;
            }());
            if (!need || *need != have)
                raise(errc::TensorInvalidInfo, "'" + path + "' holds " + std::to_string(have) +
                                                   " data bytes; its shape and dtype need " +
                                                   (need ? std::to_string(*need) : std::string("an invalid size")));
            add(name, layout.dtype, layout.shape, std::span(data, have), m, m->size, path);
        }
        for (auto& spec : p.values("--raw")) {
            // NAME:DTYPE:SHAPE:PATH; the name may itself contain ':' so split from the right.
            auto c3 = spec.rfind(':');
            auto c2 = c3 == std::string::npos || c3 == 0 ? std::string::npos : spec.rfind(':', c3 - 1);
            auto c1 = c2 == std::string::npos || c2 == 0 ? std::string::npos : spec.rfind(':', c2 - 1);
            if (c1 == std::string::npos) throw usage_error{"--raw " + spec + ": expected NAME:DTYPE:SHAPE:PATH"};
            std::string name = spec.substr(0, c1), dt = spec.substr(c1 + 1, c2 - c1 - 1);
            auto shape = parse_shape(std::string_view(spec).substr(c2 + 1, c3 - c2 - 1), spec);
            auto t = dtype_from_name(dt);
            if (!t) throw usage_error{"--raw " + spec + ": unknown dtype '" + dt + "'"};
            auto m = map_input(spec.substr(c3 + 1));
            add(name, *t, shape, std::span(static_cast<const std::byte*>(m->base), m->base == MAP_FAILED ? 0 : m->size), m,
                m->size, spec.substr(c3 + 1));
        }
        w.finish(meta.empty() ? nullptr : &meta);
        bar.finish();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        auto& st = w.stats();
        std::printf("wrote %s: %llu tensors, %s in %.3f s (%.2f GB/s)%s\n", terminal_text(out).c_str(),
                    static_cast<unsigned long long>(st.tensors), human_bytes(st.file_size).c_str(), s,
                    s > 0 ? st.file_size / s / 1e9 : 0.0,
                    st.relocation.empty() ? "" : (", header relocated by " + st.relocation).c_str());
        return exit_ok;
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe pack: %s\n", terminal_text(e.message).c_str());
        return exit_usage;
    } catch (...) {
        report_failure("ringsafe pack", current_failure(), "", false);
        return exit_invalid;
    }
}

command_registration reg{"pack", "write .npy / raw files into a new safetensors file", &run};

}  // namespace

// A header of 600 000 tensors through `ls`, `verify` and `load`: each stays
// within twice the header's size in peak RSS (the header is parsed as it is
// read, the table is compact, output and plans are streamed or batched), and
// verify's digests, spilled to a temporary file beyond 65 536 tensors, come
// back right.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "ringsafe/header.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

constexpr std::size_t tensor_count = 600'000;

// model.layers.<i/1000>.mlp.experts.<i%1000>.weight: F32 [1], data = i as 4 bytes.
std::uint64_t write_many_tensors(const std::filesystem::path& p) {
    std::vector<tensor_entry> entries(tensor_count);
    for (std::size_t i = 0; i < tensor_count; ++i) {
        auto& e = entries[i];
        e.name = "model.layers." + std::to_string(i / 1000) + ".mlp.experts." + std::to_string(i % 1000) + ".weight";
        e.dtype = dtype::F32;
        e.shape = {1};
        e.begin = 4 * i;
        e.end = 4 * i + 4;
    }
    const metadata_map meta{{"format", "pt"}};
    const std::string json = serialize_header(entries, &meta);
    std::ofstream out(p, std::ios::binary);
    std::byte prefix[8];
    encode_length_prefix(json.size(), prefix);
    out.write(reinterpret_cast<const char*>(prefix), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    for (std::uint32_t i = 0; i < tensor_count; ++i) out.write(reinterpret_cast<const char*>(&i), 4);
    return json.size();
}

struct measured {
    int status = -1;
    long max_rss_bytes = 0;
};

// Runs the CLI with `args`, stdout to `out`, and returns its exit status and peak RSS.
measured run_measured(const std::vector<std::string>& args, const std::filesystem::path& out) {
    std::vector<std::string> argv_s = {cli_path()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ::dup2(fd, 1) < 0) ::_exit(126);
        // meson test sets it: glibc then fills every allocation, reserved
        // address space included, which no user's process does.
        ::unsetenv("MALLOC_PERTURB_");
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int st = 0;
    rusage ru{};
    REQUIRE(::wait4(pid, &st, 0, &ru) == pid);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, ru.ru_maxrss * 1024L};
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Shadow memory and quarantine: RSS says nothing under a sanitizer.
constexpr bool sanitized = test::asan_build || test::tsan_build;

}  // namespace

TEST_CASE("ls, verify and load of a 600 000-tensor header stay within twice its size", "[cli][huge]") {
    temp_dir dir;
    const auto file = dir / "many.safetensors";
    // Written by a child process: a peak RSS survives fork and exec, so the
    // measured commands must start from a small parent.
    const pid_t writer = ::fork();
    REQUIRE(writer >= 0);
    if (writer == 0) {
        write_many_tensors(file);
        ::_exit(0);
    }
    int wst = 0;
    REQUIRE(::waitpid(writer, &wst, 0) == writer);
    REQUIRE((WIFEXITED(wst) && WEXITSTATUS(wst) == 0));
    std::uint64_t n = 0;
    {
        unsigned char prefix[8] = {};
        std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(prefix), 8);
        for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
    }
    const std::string limit = std::to_string(n + 1);
    const auto out = dir / "out.txt";

    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"ls", "--max-header-size", limit, file.string()},
          std::vector<std::string>{"ls", "--json", "--max-header-size", limit, file.string()},
          std::vector<std::string>{"verify", "--max-header-size", limit, file.string()},
          std::vector<std::string>{"verify", "--json", "--max-header-size", limit, file.string()},
          std::vector<std::string>{"load", "--max-header-size", limit, file.string()}}) {
        INFO(args[0] << " " << args[1] << ": header of " << n << " bytes");
        const measured m = run_measured(args, out);
        CHECK(m.status == 0);
        INFO("peak RSS " << m.max_rss_bytes << " bytes");
        if (!sanitized) CHECK(static_cast<std::uint64_t>(m.max_rss_bytes) <= 2 * n);
    }

    // The last verify --json: every digest is that of its tensor's 4 bytes.
    REQUIRE(run_measured({"verify", "--json", "--max-header-size", limit, file.string()}, out).status == 0);
    const auto doc = boost::json::parse(read_text(out)).as_object();
    const auto& tensors = doc.at("tensors").as_array();
    REQUIRE(tensors.size() == tensor_count);
    for (std::size_t i : {std::size_t{0}, std::size_t{65535}, std::size_t{65536}, std::size_t{65537}, tensor_count - 1}) {
        INFO("tensor " << i);
        const auto v = static_cast<std::uint32_t>(i);
        std::byte bytes[4];
        std::memcpy(bytes, &v, 4);
        const auto& t = tensors[i].as_object();
        CHECK(t.at("name").as_string() ==
              ("model.layers." + std::to_string(i / 1000) + ".mlp.experts." + std::to_string(i % 1000) + ".weight"));
        CHECK(t.at("sha256").as_string() == sha256_hex(bytes));
    }
    CHECK(doc.at("metadata").as_object().at("format").as_string() == "pt");
}

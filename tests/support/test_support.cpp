// Shared helpers for the test programs.
#include "test_support.hpp"

#include <openssl/evp.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include "ringsafe/error.hpp"

namespace ringsafe::test {

std::filesystem::path shared_dir() {
    const char* s = std::getenv("RINGSAFE_SHARED");
    return s ? std::filesystem::path(s) : std::filesystem::path("../shared");
}

std::filesystem::path conformance_dir() { return shared_dir() / "conformance"; }

std::string cli_path() {
    const char* s = std::getenv("RINGSAFE_CLI");
    if (!s) throw std::runtime_error("RINGSAFE_CLI is not set (run the tests through meson test)");
    return s;
}

temp_dir::temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ringsafe-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string sha256_hex(std::span<const std::byte> data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

std::vector<std::byte> read_file(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + p.string());
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(raw.size());
    if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
    return out;
}

void write_file(const std::filesystem::path& p, std::span<const std::byte> data) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

void write_file(const std::filesystem::path& p, const std::string& data) {
    write_file(p, std::as_bytes(std::span(data.data(), data.size())));
}

std::byte pattern_byte(std::uint64_t seed, std::uint64_t i) {
    std::uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i >> 3) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return static_cast<std::byte>(x >> ((i & 7) * 8));
}

void fill_pattern(std::span<std::byte> out, std::uint64_t seed, std::uint64_t first_index) {
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = pattern_byte(seed, first_index + k);
}

std::string kind_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ringsafe::error& e) {
        return std::string(e.kind()) + ": " + e.what();
    }
    return "no error";
}

scoped_env::scoped_env(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* v = std::getenv(name_.c_str())) was_ = v;
    if (value) ::setenv(name_.c_str(), value->c_str(), 1);
    else ::unsetenv(name_.c_str());
}

scoped_env::~scoped_env() {
    if (was_) ::setenv(name_.c_str(), was_->c_str(), 1);
    else ::unsetenv(name_.c_str());
}

std::vector<std::byte> read_whole(source& s) {
    std::vector<std::byte> all(s.size());
    s.read_exact(0, all);
    return all;
}

std::map<std::string, std::vector<std::byte>> read_tensors(reader& r) {
    auto sel = r.all();
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> spans;
    for (auto i : sel.indices()) bufs.emplace_back(r.tensors()[i].size());
    for (auto& b : bufs) spans.emplace_back(b);
    r.read(sel, spans);
    std::map<std::string, std::vector<std::byte>> out;
    for (std::size_t k = 0; k < sel.size(); ++k) out[r.tensors()[sel.indices()[k]].name] = std::move(bufs[k]);
    return out;
}

bool eventually(const std::function<bool()>& ok, std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!ok() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return ok();
}

run_result run_command(const std::string& cmd) {
    run_result r;
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// io threads carry PF_IO_WORKER in /proc/<tid>/stat's flags from creation;
// their iou- name is set only once they run, so a name test races.
std::vector<int> user_thread_ids() {
    constexpr unsigned long pf_io_worker = 0x10;
    std::vector<int> ids;
    for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream stat(e.path() / "stat");
        std::string line;
        if (!std::getline(stat, line)) continue;  // gone
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream fields(line.substr(close + 1));
        std::string skip;
        unsigned long flags = 0;
        // state ppid pgrp session tty_nr tpgid flags
        for (int i = 0; i < 6; ++i) fields >> skip;
        if (!(fields >> flags)) continue;
        if (!(flags & pf_io_worker)) ids.push_back(std::stoi(e.path().filename().string()));
    }
    return ids;
}

std::size_t user_threads() { return user_thread_ids().size(); }

// What a hung process is doing, to stderr: each thread's name, kernel wait
// channel, system call and kernel stack (/proc, root only for the stack), then
// every thread's user stack where gdb is installed.
void report_hung_process(int pid) {
    const std::string p = std::to_string(pid);
    const std::string cmd =
        "for t in /proc/" + p + "/task/*; do echo \"== hung pid " + p +
        " thread ${t##*/} ($(cat $t/comm 2>/dev/null)) wchan=$(cat $t/wchan 2>/dev/null)\"; "
        "echo \"syscall: $(cat $t/syscall 2>/dev/null)\"; cat $t/stack 2>/dev/null; done 1>&2; "
        "command -v gdb >/dev/null && timeout 60 gdb -p " + p +
        " -batch -nx -q -ex 'thread apply all bt' 1>&2 2>/dev/null";
    std::fflush(nullptr);
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "(the report on pid %d ended with an error)\n", pid);
}

int wait_child(int pid, int limit_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    int status = 0;
    for (;;) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) return status;
        if (w < 0) return -1;
        if (std::chrono::steady_clock::now() > until) {
            report_hung_process(pid);
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

void write_u8_file(const std::filesystem::path& p, std::span<const std::byte> data) {
    const std::string json = R"({"w":{"dtype":"U8","shape":[)" + std::to_string(data.size()) +
                             R"(],"data_offsets":[0,)" + std::to_string(data.size()) + "]}}";
    std::vector<std::byte> file(8 + json.size() + data.size());
    for (int i = 0; i < 8; ++i) file[i] = std::byte(static_cast<unsigned char>(json.size() >> (8 * i)));
    std::memcpy(file.data() + 8, json.data(), json.size());
    if (!data.empty()) std::memcpy(file.data() + 8 + json.size(), data.data(), data.size());
    write_file(p, file);
}

}  // namespace ringsafe::test

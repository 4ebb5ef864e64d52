// Shared helpers for the test programs: paths, temp dirs, hashing, patterns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringsafe/error.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/source.hpp"
#include "skip.hpp"

// Which sanitizer this test program is built with: GCC says so with macros,
// clang with __has_feature; an ASan build's test code, compiled uninstrumented
// (tests/support/meson.build), is told by -DRINGSAFE_TEST_ASAN=1.
#if defined(RINGSAFE_TEST_ASAN)
#elif defined(__SANITIZE_ADDRESS__)
#define RINGSAFE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RINGSAFE_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RINGSAFE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGSAFE_TEST_TSAN 1
#endif
#endif

namespace ringsafe::test {

#ifdef RINGSAFE_TEST_ASAN
constexpr bool asan_build = true;
#else
constexpr bool asan_build = false;
#endif
#ifdef RINGSAFE_TEST_TSAN
constexpr bool tsan_build = true;
#else
constexpr bool tsan_build = false;
#endif

// ../shared (from $RINGSAFE_SHARED, set by meson).
std::filesystem::path shared_dir();
// ../shared/conformance.
std::filesystem::path conformance_dir();
// The built CLI (from $RINGSAFE_CLI).
std::string cli_path();

// A fresh temporary directory, removed with everything in it on destruction.
class temp_dir {
public:
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

// Lowercase hex SHA-256 of `data`.
std::string sha256_hex(std::span<const std::byte> data);
// Reads a whole file.
std::vector<std::byte> read_file(const std::filesystem::path& p);
// Writes a whole file.
void write_file(const std::filesystem::path& p, std::span<const std::byte> data);
void write_file(const std::filesystem::path& p, const std::string& data);
// Deterministic bytes: byte i of stream `seed` (a cheap hash of seed and i).
std::byte pattern_byte(std::uint64_t seed, std::uint64_t i);
void fill_pattern(std::span<std::byte> out, std::uint64_t seed, std::uint64_t first_index = 0);

// Runs f and returns "<kind>: <message>" of the ringsafe::error it throws, or "no error".
std::string kind_of(const std::function<void()>& f);

// Runs fn and returns the ringsafe::error it throws; throws std::logic_error
// (a failed test) when it throws none.
template <class Fn>
error expect_error(Fn fn) {
    try {
        fn();
    } catch (const error& e) {
        return e;
    }
    throw std::logic_error("no ringsafe::error thrown");
}

// Sets (or, with nullopt, unsets) environment variable `name` for one scope;
// restores what it was.
class scoped_env {
public:
    scoped_env(std::string name, const std::optional<std::string>& value);
    ~scoped_env();
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    std::string name_;
    std::optional<std::string> was_;
};

// Every byte of `s` (read_exact of the whole source).
std::vector<std::byte> read_whole(source& s);

// Every tensor of `r`, read whole in one read() call, by name.
std::map<std::string, std::vector<std::byte>> read_tensors(reader& r);

// Threads of this process, without the kernel's io_uring workers (iou-wrk-*,
// iou-sqp-*: io-wq threads the kernel starts for punted requests, statx or
// openat; not an event loop or pool of ours). Threads exiting meanwhile are
// not counted.
std::size_t user_threads();
// Their thread ids (as gettid() gives them).
std::vector<int> user_thread_ids();
// Descriptors this process has open (/proc/self/fd; the directory's own included).
std::size_t open_fds();

// Calls `ok` every 10 ms until it returns true, for at most `limit`; returns
// its last answer (for what ends on another thread: a thread's exit, a close).
bool eventually(const std::function<bool()>& ok, std::chrono::seconds limit);

// Runs a shell command; returns its exit status and captures stdout.
struct run_result {
    int status = -1;
    std::string out;
};
run_result run_command(const std::string& cmd);

// Waits up to `limit_s` seconds for child `pid`; returns its wait status, or -1
// on timeout (after report_hung_process, then SIGKILL and reaping it) or a waitpid error.
int wait_child(int pid, int limit_s);

// Prints to stderr what process `pid` is doing: per thread its wait channel,
// system call and kernel stack, and its user stacks where gdb is installed.
void report_hung_process(int pid);

// Writes a safetensors file holding one U8 tensor "w" of `data`'s bytes.
void write_u8_file(const std::filesystem::path& p, std::span<const std::byte> data);

}  // namespace ringsafe::test

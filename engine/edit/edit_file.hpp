// The steps every in-place or rewriting edit is made of (engine-internal):
// opening the target with its refusals, positioned writes and syncs that name
// the path, the rewrite's temporary with the data copied in the kernel, and
// the crash tests' stall hook (RINGSAFE_EDIT_TEST_STALL, edit.hpp).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ringsafe::edit {

// A write inside one page of this size is all or nothing for a killed process (the kernel
// copies a write page by page and checks for a fatal signal between pages).
inline constexpr std::uint64_t atomic_page = 4096;

// The file being edited, open read-write.
class target {
public:
    // Refuses (InvalidArgument naming the path, nothing opened for writing) a
    // path that is not a regular file or whose mode has no write bit; errno
    // errors of open/stat name the path.
    explicit target(const std::string& path);
    ~target();
    target(const target&) = delete;
    target& operator=(const target&) = delete;

    int fd() const noexcept { return fd_; }
    const std::string& path() const noexcept { return path_; }
    std::uint64_t size() const noexcept { return static_cast<std::uint64_t>(st_.st_size); }

    // Reads exactly n bytes at `offset` (Truncated when the file ends first).
    void read(void* out, std::size_t n, std::uint64_t offset) const;
    // Writes all n bytes at `offset` with pwrite; `what` names the step in an error.
    void write(const void* data, std::size_t n, std::uint64_t offset, std::string_view what) const;
    // fdatasync (when `on`), naming the path.
    void sync(bool on) const;

private:
    std::string path_;
    int fd_ = -1;
    struct stat st_ {};
};

// Writes `header` then the `size` bytes at `from` of the target's file into a
// temporary beside it, keeping its mode, and renames it over the target
// (fsync of the file and the directory when `sync`). Returns the bytes written.
std::uint64_t rewrite(const target& t, std::string_view header, std::uint64_t from, std::uint64_t size, bool sync);

// The crash tests' hook: when RINGSAFE_EDIT_TEST_STALL equals `point`, says so
// on stderr and waits for a signal forever. Does nothing otherwise.
void stall_point(std::string_view point);

}  // namespace ringsafe::edit

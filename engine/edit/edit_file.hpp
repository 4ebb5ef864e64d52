// The steps every in-place or rewriting edit is made of (engine-internal):
// opening the target with its refusals, positioned writes and syncs that name
// the path, the one-page commit of an in-place edit, the rewrite's temporary
// with the data copied in the kernel, and the crash tests' stall hook
// (RINGSAFE_EDIT_TEST_STALL, edit.hpp).
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ringsafe/edit.hpp"

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

// Where `now` differs from `old` (the same size, not equal): its bytes [lo, hi).
struct changed_bytes {
    std::size_t lo = 0, hi = 0;
};
changed_bytes changed(std::string_view old, std::string_view now);

// The one-page commit of an in-place edit, `now` being the new bytes of the
// file from offset `at` on and `c` where they changed: when [at + c.lo,
// at + c.hi) lies inside one atomic_page, writes those bytes with one pwrite
// (after stall_point("commit"); `what` names the step in an error) and
// fdatasync (when `sync`), and returns the in-place edit_result. Otherwise
// writes nothing and returns nullopt.
std::optional<edit_result> commit_in_one_page(const target& t, std::string_view now, changed_bytes c, std::uint64_t at,
                                              bool sync, std::string_view what);

// Writes `header` then the `size` bytes at `from` of the target's file into a
// temporary beside it, keeping its mode, and renames it over the target
// (fsync of the file and the directory when `sync`). Returns the bytes written.
std::uint64_t rewrite(const target& t, std::string_view header, std::uint64_t from, std::uint64_t size, bool sync);

// The crash tests' hook: when RINGSAFE_EDIT_TEST_STALL equals `point`, says so
// on stderr and waits for a signal forever. Does nothing otherwise.
void stall_point(std::string_view point);

}  // namespace ringsafe::edit

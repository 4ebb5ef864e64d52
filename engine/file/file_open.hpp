// Opening a local file for a file source (engine-internal): the file-type
// checks and the error messages, shared by open_file() (blocking syscalls)
// and async_open (the same steps as io_uring operations). The file source's
// options, and the source made from a file opened either way: uring/file_source.hpp.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "file/dio_alignment.hpp"

namespace ringsafe::file {

// The buffered descriptor (O_NONBLOCK: open(2) of a FIFO without a writer
// would block forever; cleared once the file is known to be regular).
inline constexpr int buffered_open_flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
// The O_DIRECT descriptor (file_options::direct).
inline constexpr int direct_open_flags = O_RDONLY | O_CLOEXEC | O_DIRECT;

// After a successful open: EISDIR for a directory, InvalidArgument for
// anything but a regular file (st_mode / stx_mode).
void check_file_type(const std::string& path, unsigned mode);
// Clears O_NONBLOCK on the buffered descriptor (after check_file_type).
void clear_nonblock(int fd) noexcept;

// The errors, each naming `path` (errno values as system_category).
[[noreturn]] void raise_open_failed(const std::string& path, int err);
[[noreturn]] void raise_stat_failed(const std::string& path, int err);
[[noreturn]] void raise_direct_open_failed(const std::string& path, int err);
[[noreturn]] void raise_read_failed(const std::string& path, int err, std::uint64_t at);
// The file ended at `at` while reading [offset, end).
[[noreturn]] void raise_read_truncated(const std::string& path, std::uint64_t at, std::uint64_t offset,
                                       std::uint64_t end);

// pread(2) until `dst` is full; errors as above.
void pread_exact(int fd, const std::string& path, std::uint64_t offset, std::span<std::byte> dst);

// A descriptor closed on destruction unless released.
class owned_fd {
public:
    explicit owned_fd(int fd = -1) noexcept : fd_(fd) {}
    owned_fd(owned_fd&& o) noexcept : fd_(o.release()) {}
    owned_fd& operator=(owned_fd&& o) noexcept;
    ~owned_fd();
    int get() const noexcept { return fd_; }
    int release() noexcept {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

private:
    int fd_;
};

// What opening produced: the descriptors (owned), the size at open, the
// O_DIRECT alignment (when direct) and the first min(prefetch, size) bytes.
struct opened_file {
    owned_fd fd;         // buffered (O_NONBLOCK cleared)
    owned_fd direct_fd;  // O_DIRECT, when file_options::direct
    std::uint64_t size = 0;
    std::uint64_t device = 0, inode = 0;  // st_dev, st_ino
    std::int64_t mtime_ns = 0;            // st_mtim in nanoseconds
    dio_alignment align{1, 1};
    std::vector<std::byte> prefix;
};

// The blocking open: open, fstat, type check, the O_DIRECT open and its
// alignment when `direct`, the read of the first min(prefetch, size) bytes.
// Throws ringsafe::error naming `path`.
opened_file open_blocking(const std::string& path, bool direct, std::uint64_t prefetch);
// The step after opening f.fd, for both paths: fstat (inline: it reads the
// in-memory inode), check_file_type, clear_nonblock, f.size.
void stat_opened(const std::string& path, opened_file& f);

}  // namespace ringsafe::file

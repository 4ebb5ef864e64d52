// Opening a local file: checks, errors and the blocking open shared with async_open.
#include "file/file_open.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ringsafe/error.hpp"

namespace ringsafe::file {

void check_file_type(const std::string& path, unsigned mode) {
    if (S_ISDIR(mode)) raise_errno(EISDIR, path, path);  // an unreadable source: IoError
    if (!S_ISREG(mode)) raise(errc::InvalidArgument, path + ": not a regular file");
}

void clear_nonblock(int fd) noexcept { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK); }

void raise_open_failed(const std::string& path, int err) { raise_errno(err, path + ": open", path); }
void raise_stat_failed(const std::string& path, int err) { raise_errno(err, path + ": fstat", path); }

void raise_direct_open_failed(const std::string& path, int err) {
    if (err == EINVAL)
        raise(errc::InvalidArgument, path + ": the filesystem refuses O_DIRECT "
                                            "(open it with direct = false to read through the page cache)");
    raise_errno(err, path + ": open with O_DIRECT", path);
}

void raise_read_failed(const std::string& path, int err, std::uint64_t at) {
    raise_errno(err, path + ": read at file offset " + std::to_string(at), path);
}

void raise_read_truncated(const std::string& path, std::uint64_t at, std::uint64_t offset, std::uint64_t end) {
    raise(errc::Truncated, path + ": the file ended at offset " + std::to_string(at) + " while reading bytes " +
                               std::to_string(offset) + ".." + std::to_string(end));
}

void pread_exact(int fd, const std::string& path, std::uint64_t offset, std::span<std::byte> dst) {
    std::uint64_t done = 0;
    while (done < dst.size()) {
        const ssize_t n = ::pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) raise_read_failed(path, errno, offset + done);
        if (n == 0) raise_read_truncated(path, offset + done, offset, offset + dst.size());
        done += static_cast<std::uint64_t>(n);
    }
}

owned_fd& owned_fd::operator=(owned_fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

owned_fd::~owned_fd() {
    if (fd_ >= 0) ::close(fd_);
}

void stat_opened(const std::string& path, opened_file& f) {
    struct stat st {};
    if (::fstat(f.fd.get(), &st) != 0) raise_stat_failed(path, errno);
    check_file_type(path, st.st_mode);
    clear_nonblock(f.fd.get());
    f.size = static_cast<std::uint64_t>(st.st_size);
    f.device = static_cast<std::uint64_t>(st.st_dev);
    f.inode = static_cast<std::uint64_t>(st.st_ino);
    f.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

opened_file open_blocking(const std::string& path, bool direct, std::uint64_t prefetch) {
    opened_file f;
    f.fd = owned_fd(::open(path.c_str(), buffered_open_flags));
    if (f.fd.get() < 0) raise_open_failed(path, errno);
    stat_opened(path, f);
    if (direct) {
        f.direct_fd = owned_fd(::open(path.c_str(), direct_open_flags));
        if (f.direct_fd.get() < 0) raise_direct_open_failed(path, errno);
        f.align = query_dio_alignment(f.direct_fd.get(), path);
    }
    f.prefix.resize(static_cast<std::size_t>(std::min(prefetch, f.size)));
    pread_exact(f.fd.get(), path, 0, f.prefix);
    return f;
}

}  // namespace ringsafe::file

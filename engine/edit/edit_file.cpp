// The steps of an edit (edit_file.hpp).
#include "edit/edit_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "file/temp_file.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::edit {

target::target(const std::string& path) : path_(path) {
    if (::stat(path.c_str(), &st_) != 0) raise_errno(errno, "opening '" + path + "' to edit it", path);
    if (!S_ISREG(st_.st_mode)) raise(errc::InvalidArgument, "'" + path + "' is not a regular file: nothing edited");
    if ((st_.st_mode & 0222) == 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st_.st_mode & 07777));
        raise(errc::InvalidArgument,
              "'" + path + "' is read-only (mode " + mode + "): nothing edited; make it writable first");
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) raise_errno(errno, "opening '" + path + "' for writing", path);
    if (::fstat(fd_, &st_) != 0) {
        const int e = errno;
        ::close(fd_);
        raise_errno(e, "stat of '" + path + "'", path);
    }
}

target::~target() {
    if (fd_ >= 0) ::close(fd_);
}

void target::read(void* out, std::size_t n, std::uint64_t offset) const {
    auto* p = static_cast<char*>(out);
    while (n) {
        const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) raise_errno(errno, "reading '" + path_ + "' at offset " + std::to_string(offset), path_);
        if (got == 0) raise(errc::Truncated, "'" + path_ + "' ends at offset " + std::to_string(offset));
        p += got;
        n -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
}

void target::write(const void* data, std::size_t n, std::uint64_t offset, std::string_view what) const {
    const auto* p = static_cast<const char*>(data);
    while (n) {
        const ssize_t put = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0)
            raise_errno(put < 0 ? errno : EIO,
                        std::string(what) + " of '" + path_ + "' at offset " + std::to_string(offset), path_);
        p += put;
        n -= static_cast<std::size_t>(put);
        offset += static_cast<std::uint64_t>(put);
    }
}

void target::sync(bool on) const {
    if (on && ::fdatasync(fd_) != 0) raise_errno(errno, "fdatasync of '" + path_ + "'", path_);
}

std::uint64_t rewrite(const target& t, std::string_view header, std::uint64_t from, std::uint64_t size, bool sync) {
    file::temp_file tmp(t.path(), false);
    const auto put = [&](const char* p, std::size_t n, std::uint64_t off) {
        while (n) {
            const ssize_t w = ::pwrite(tmp.fd(), p, n, static_cast<off_t>(off));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) raise_errno(w < 0 ? errno : EIO, "writing the new file for '" + t.path() + "'", t.path());
            p += w;
            n -= static_cast<std::size_t>(w);
            off += static_cast<std::uint64_t>(w);
        }
    };
    put(header.data(), header.size(), 0);
    // The data section, in the kernel where it can (copy_file_range), else through a buffer.
    loff_t in = static_cast<loff_t>(from), out = static_cast<loff_t>(header.size());
    std::uint64_t left = size;
    bool kernel = true;
    std::vector<char> buf;
    while (left) {
        if (kernel) {
            const ssize_t n = ::copy_file_range(t.fd(), &in, tmp.fd(), &out, left, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                kernel = false;
                continue;
            }
            if (n < 0) raise_errno(errno, "copying the data of '" + t.path() + "' into its new file", t.path());
            if (n == 0) raise(errc::Truncated, "'" + t.path() + "' ends at offset " + std::to_string(in));
            left -= static_cast<std::uint64_t>(n);
            continue;
        }
        if (buf.empty()) buf.resize(8u << 20);
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
        t.read(buf.data(), n, static_cast<std::uint64_t>(in));
        put(buf.data(), n, static_cast<std::uint64_t>(out));
        in += static_cast<loff_t>(n);
        out += static_cast<loff_t>(n);
        left -= n;
    }
    stall_point("publish");
    tmp.publish(sync, sync);
    return header.size() + size;
}

changed_bytes changed(std::string_view old, std::string_view now) {
    changed_bytes c{0, now.size()};
    while (now[c.lo] == old[c.lo]) ++c.lo;
    while (now[c.hi - 1] == old[c.hi - 1]) --c.hi;
    return c;
}

std::optional<edit_result> commit_in_one_page(const target& t, std::string_view now, changed_bytes c, std::uint64_t at,
                                              bool sync, std::string_view what) {
    const std::uint64_t a = at + c.lo, b = at + c.hi;
    if (a / atomic_page != (b - 1) / atomic_page) return std::nullopt;
    stall_point("commit");
    const std::size_t n = c.hi - c.lo;
    t.write(now.data() + c.lo, n, a, what);
    t.sync(sync);
    return edit_result{edit_way::in_place, "one write of " + std::to_string(n) + " bytes at offset " + std::to_string(a), n};
}

void stall_point(std::string_view point) {
    static const char* const want = std::getenv("RINGSAFE_EDIT_TEST_STALL");
    if (!want || point != want) return;
    std::fprintf(stderr, "ringsafe edit: stalled at %.*s\n", static_cast<int>(point.size()), point.data());
    std::fflush(stderr);
    for (;;) ::pause();
}

}  // namespace ringsafe::edit

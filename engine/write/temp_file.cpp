// Temporary files beside the target, published by link/rename (temp_file.hpp).
#include "write/temp_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>

#include "ringsafe/error.hpp"

namespace ringsafe::write_engine {
namespace {

std::string parent_of(const std::string& path) {
    auto p = std::filesystem::path(path).parent_path().string();
    return p.empty() ? "." : p;
}

std::string random_suffix() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::string s;
    for (int i = 0; i < 10; ++i) s += alphabet[rng() % 36];
    return s;
}

std::string named_temp_path(const std::string& target) {
    std::filesystem::path t(target);
    return (t.parent_path() / ("." + t.filename().string() + ".ringsafe-" + random_suffix())).string();
}

}  // namespace

void sync_parent_dir(const std::string& path) {
    std::string dir = parent_of(path);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) raise_errno(errno, "opening directory '" + dir + "' to sync it");
    int r = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    if (r != 0) raise_errno(err, "fsync of directory '" + dir + "'");
}

temp_file::temp_file(const std::string& target, bool direct) : target_(target), dir_(parent_of(target)) {
    if (target.empty()) raise(errc::InvalidArgument, "empty output path");
    for (int attempt = 0; attempt < 2 && fd_ < 0; ++attempt) {
        int dflag = (direct && attempt == 0) ? O_DIRECT : 0;
        fd_ = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | dflag, 0644);
        if (fd_ >= 0) {
            direct_ = dflag != 0;
            break;
        }
        if (errno != EINVAL && errno != EOPNOTSUPP && errno != EISDIR) {
            raise_errno(errno, "creating a temporary file in '" + dir_ + "' for '" + target + "'");
        }
        // O_TMPFILE unsupported (or O_DIRECT refused with it): try a named temporary.
        for (int tries = 0; tries < 16 && fd_ < 0; ++tries) {
            named_ = named_temp_path(target);
            fd_ = ::open(named_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | dflag, 0644);
            if (fd_ < 0 && errno != EEXIST) break;
        }
        if (fd_ >= 0) {
            direct_ = dflag != 0;
            break;
        }
        if (errno != EINVAL || !dflag)
            raise_errno(errno, "creating a temporary file '" + named_ + "' for '" + target + "'");
        named_.clear();  // O_DIRECT refused: retry buffered
    }
    if (fd_ < 0) raise_errno(errno, "creating a temporary file for '" + target + "'");
}

temp_file::~temp_file() { discard(); }

void temp_file::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!published_ && !named_.empty()) ::unlink(named_.c_str());
    named_.clear();
}

void temp_file::adopt(temp_file& other) noexcept {
    discard();
    fd_ = other.fd_;
    named_ = other.named_;
    direct_ = other.direct_;
    other.fd_ = -1;
    other.named_.clear();
}

void temp_file::publish(bool sync_file, bool sync_dir) {
    if (fd_ < 0) raise(errc::WriterState, "publishing '" + target_ + "': the file was discarded");
    if (sync_file && ::fsync(fd_) != 0) raise_errno(errno, "fsync of the new '" + target_ + "'");
    if (named_.empty()) {
        // Give the unnamed inode a name: straight at the target when nothing is
        // there, else at a named temporary that is then renamed over it.
        std::string proc = "/proc/self/fd/" + std::to_string(fd_);
        if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, target_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            published_ = true;
        } else {
            if (errno != EEXIST) raise_errno(errno, "linking the new file at '" + target_ + "'");
            for (int tries = 0; tries < 16; ++tries) {
                named_ = named_temp_path(target_);
                if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, named_.c_str(), AT_SYMLINK_FOLLOW) == 0)
                    break;
                int err = errno;
                named_.clear();
                if (err != EEXIST) raise_errno(err, "linking a temporary beside '" + target_ + "'");
            }
            if (named_.empty()) raise_errno(EEXIST, "linking a temporary beside '" + target_ + "'");
        }
    }
    if (!published_) {
        if (::rename(named_.c_str(), target_.c_str()) != 0)
            raise_errno(errno, "renaming '" + named_ + "' to '" + target_ + "'");
        published_ = true;
    }
    named_.clear();
    if (sync_dir) sync_parent_dir(target_);
    ::close(fd_);
    fd_ = -1;
}

}  // namespace ringsafe::write_engine

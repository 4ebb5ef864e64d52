// Temporary files beside the target, published by link/rename (temp_file.hpp).
#include "file/temp_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>

#include "ringsafe/error.hpp"

namespace ringsafe::file {
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

// Gives the temporary `fd` the access of the file it will replace: its owner and
// group where the process may (best effort), then its permission bits; the
// set-id and sticky bits only when owner and group both carried over. Nothing
// when `target` is not an existing regular file: the temporary keeps the mode
// it was created with (0666 less the umask). Throws (naming the target) only
// for an error other than the filesystem's refusing permissions.
void match_target_access(int fd, const std::string& target) {
    struct stat want {};
    if (::stat(target.c_str(), &want) != 0 || !S_ISREG(want.st_mode)) return;
    struct stat have {};
    if (::fstat(fd, &have) != 0) raise_errno(errno, "fstat of the temporary for '" + target + "'", target);
    if ((have.st_uid != want.st_uid || have.st_gid != want.st_gid) && ::fchown(fd, want.st_uid, want.st_gid) != 0)
        (void)!::fchown(fd, static_cast<uid_t>(-1), want.st_gid);  // not the owner: the group alone, if a member
    const bool same_owner = ::fstat(fd, &have) == 0 && have.st_uid == want.st_uid && have.st_gid == want.st_gid;
    const mode_t mode = want.st_mode & (same_owner ? 07777 : 0777);
    // A filesystem without Unix permissions (vfat, some FUSE) refuses: its files all share the mount's mode.
    if (::fchmod(fd, mode) != 0 && errno != EPERM && errno != EOPNOTSUPP)
        raise_errno(errno, "giving the temporary for '" + target + "' the permissions of the file it replaces", target);
}

}  // namespace

std::string temp_path_beside(const std::string& target) {
    std::filesystem::path t(target);
    std::string name = ".";  // appended piecewise: GCC 12 warns (-Wrestrict) on "." + std::string&&
    name += t.filename().string();
    name += ".ringsafe-";
    name += random_suffix();
    return (t.parent_path() / name).string();
}

void replace_file(const std::string& target, std::string_view text) {
    const std::string tmp = temp_path_beside(target);
    const int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) raise_errno(errno, "creating '" + tmp + "'", tmp);
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            ::close(fd);
            ::unlink(tmp.c_str());
            raise_errno(err, "writing '" + tmp + "'", tmp);
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        raise_errno(err, "renaming '" + tmp + "' to '" + target + "'", target);
    }
}

void replace_with_symlink(const std::string& target, const std::string& link) {
    const std::string tmp = temp_path_beside(target);
    if (::symlink(link.c_str(), tmp.c_str()) != 0) raise_errno(errno, "making the link '" + tmp + "'", tmp);
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        raise_errno(err, "renaming the link '" + tmp + "' to '" + target + "'", target);
    }
}

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
        fd_ = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | dflag, 0666);
        if (fd_ >= 0) {
            direct_ = dflag != 0;
            break;
        }
        if (errno != EINVAL && errno != EOPNOTSUPP && errno != EISDIR) {
            raise_errno(errno, "creating a temporary file in '" + dir_ + "' for '" + target + "'", dir_);
        }
        // O_TMPFILE unsupported (or O_DIRECT refused with it): try a named temporary.
        for (int tries = 0; tries < 16 && fd_ < 0; ++tries) {
            named_ = temp_path_beside(target);
            fd_ = ::open(named_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | dflag, 0666);
            if (fd_ < 0 && errno != EEXIST) break;
        }
        if (fd_ >= 0) {
            direct_ = dflag != 0;
            break;
        }
        if (errno != EINVAL || !dflag)
            raise_errno(errno, "creating a temporary file '" + named_ + "' for '" + target + "'", named_);
        named_.clear();  // O_DIRECT refused: retry buffered
    }
    if (fd_ < 0) raise_errno(errno, "creating a temporary file for '" + target + "'");
    try {
        match_target_access(fd_, target_);  // never readable by more than the file it replaces, even unfinished
    } catch (...) {
        discard();
        throw;
    }
}

temp_file::~temp_file() { discard(); }

void temp_file::discard() noexcept {
    if (dir_fd_ >= 0) ::close(dir_fd_);
    dir_fd_ = -1;
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

void temp_file::begin_publish(bool sync_file, bool sync_dir) {
    if (fd_ < 0) raise(errc::WriterState, "publishing '" + target_ + "': the file was discarded");
    match_target_access(fd_, target_);  // again: the target may have appeared or changed while writing
    sync_dir_ = sync_dir;
    link_tries_ = 0;
    stage_ = sync_file ? step_kind::fsync_file : named_.empty() ? step_kind::link : step_kind::rename;
}

temp_file::publish_step temp_file::next_step() const {
    publish_step s;
    s.kind = stage_;
    switch (stage_) {
    case step_kind::fsync_file: s.fd = fd_; break;
    case step_kind::link:
        // The unnamed inode gets a name: straight at the target when nothing
        // is there, else (after EEXIST) at a named temporary renamed over it.
        s.from = "/proc/self/fd/" + std::to_string(fd_);
        s.to = named_.empty() ? target_ : named_;
        break;
    case step_kind::rename: s.from = named_, s.to = target_; break;
    case step_kind::open_dir: s.to = dir_; break;
    case step_kind::fsync_dir: s.fd = dir_fd_; break;
    case step_kind::done: break;
    }
    return s;
}

void temp_file::step_done(int r) {
    const int err = r < 0 ? -r : 0;
    auto after_publish = [&] {
        published_ = true;
        named_.clear();
        stage_ = sync_dir_ ? step_kind::open_dir : step_kind::done;
    };
    switch (stage_) {
    case step_kind::fsync_file:
        if (err) raise_errno(err, "fsync of the new '" + target_ + "'", target_);
        stage_ = named_.empty() ? step_kind::link : step_kind::rename;
        break;
    case step_kind::link:
        if (named_.empty() && link_tries_ == 0) {  // the link at the target itself
            if (!err) {
                after_publish();
                break;
            }
            if (err != EEXIST) raise_errno(err, "linking the new file at '" + target_ + "'");
        } else if (!err) {
            stage_ = step_kind::rename;
            break;
        } else {
            named_.clear();
            if (err != EEXIST || link_tries_ >= 16) raise_errno(err, "linking a temporary beside '" + target_ + "'");
        }
        ++link_tries_;
        named_ = temp_path_beside(target_);
        break;
    case step_kind::rename:
        if (err) raise_errno(err, "renaming '" + named_ + "' to '" + target_ + "'");
        after_publish();
        break;
    case step_kind::open_dir:
        if (err) raise_errno(err, "opening directory '" + dir_ + "' to sync it");
        dir_fd_ = r;
        stage_ = step_kind::fsync_dir;
        break;
    case step_kind::fsync_dir:
        ::close(dir_fd_);
        dir_fd_ = -1;
        if (err) raise_errno(err, "fsync of directory '" + dir_ + "'");
        stage_ = step_kind::done;
        break;
    case step_kind::done: break;
    }
    if (stage_ == step_kind::done) {
        ::close(fd_);
        fd_ = -1;
    }
}

void temp_file::publish(bool sync_file, bool sync_dir) {
    begin_publish(sync_file, sync_dir);
    for (publish_step s = next_step(); s.kind != step_kind::done; s = next_step()) {
        int r = 0;
        switch (s.kind) {
        case step_kind::fsync_file:
        case step_kind::fsync_dir: r = ::fsync(s.fd); break;
        case step_kind::link:
            r = ::linkat(AT_FDCWD, s.from.c_str(), AT_FDCWD, s.to.c_str(), AT_SYMLINK_FOLLOW);
            break;
        case step_kind::rename: r = ::rename(s.from.c_str(), s.to.c_str()); break;
        case step_kind::open_dir: r = ::open(s.to.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); break;
        case step_kind::done: break;
        }
        step_done(r < 0 ? -errno : r);
    }
}

}  // namespace ringsafe::file

// Files published whole at their path: written beside it, then linked or
// renamed into place, so that a reader of the path sees the old file or the
// new one, never a part. The streaming writer's new files (engine/write) and
// the Hub cache's blobs, links and refs (engine/stores) are published so.
//
// temp_file: a file being written beside its target path, published by rename
// only after a successful finish. Uses O_TMPFILE (an unnamed inode: a crash
// leaves nothing behind) where the filesystem supports it, else a named
// temporary ".NAME.ringsafe-XXXXXX" in the same directory that is unlinked on
// failure. A replacement keeps the replaced file's permission bits (and its
// owner and group where the process may); a new file gets 0666 less the umask.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringsafe::file {

class temp_file {
public:
    // Creates the temporary in the directory of `target`, with the access of the
    // regular file already at `target` if there is one. `direct` asks for
    // O_DIRECT; when the filesystem refuses it, the file is opened buffered
    // and direct() reports false. Throws ringsafe::error naming the path.
    temp_file(const std::string& target, bool direct);
    // Removes the temporary if it was not published.
    ~temp_file();
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;

    int fd() const noexcept { return fd_; }
    bool direct() const noexcept { return direct_; }
    const std::string& target() const noexcept { return target_; }

    // Gives the file the access of what is at the target path now, fsyncs it
    // (when `sync_file`), links it at the target path
    // (replacing what is there atomically), and fsyncs the directory (when
    // `sync_dir`). Throws naming the path.
    void publish(bool sync_file, bool sync_dir);

    // publish() one system call at a time, for a caller that runs them itself
    // (the async writer, as io_uring operations). begin_publish(), then until
    // next_step().kind is done: run the step, pass its result (the syscall's
    // return value, or -errno) to step_done(), which throws as publish() would.
    enum class step_kind { fsync_file, link, rename, open_dir, fsync_dir, done };
    struct publish_step {
        step_kind kind = step_kind::done;
        int fd = -1;           // fsync_file, fsync_dir
        std::string from, to;  // link (follow symlinks), rename; open_dir: `to` only (O_RDONLY | O_DIRECTORY)
    };
    void begin_publish(bool sync_file, bool sync_dir);
    publish_step next_step() const;
    void step_done(int result);
    // Closes and removes the temporary (idempotent, never throws).
    void discard() noexcept;
    // Replaces this temporary's descriptor with another temp_file's (used by
    // relocation): `other` gives up its file, this one discards its own.
    void adopt(temp_file& other) noexcept;

private:
    std::string target_;
    std::string dir_;
    std::string named_;  // path of a named temporary; empty for O_TMPFILE
    int fd_ = -1;
    bool direct_ = false;
    bool published_ = false;
    // publish() progress.
    step_kind stage_ = step_kind::done;
    bool sync_dir_ = false;
    int dir_fd_ = -1;
    int link_tries_ = 0;
};

// fsyncs the directory holding `path`; throws naming it.
void sync_parent_dir(const std::string& path);

// ".NAME.ringsafe-XXXXXX" beside `target` (random X): a named temporary's path.
std::string temp_path_beside(const std::string& target);

// Puts `text` at `target` by rename of a temporary written beside it (not
// synced: metadata a reader may lose in a crash, never see in part). Throws
// naming the paths.
void replace_file(const std::string& target, std::string_view text);

// Puts a symbolic link to `link` at `target` by rename of one made beside it.
// Throws naming the paths.
void replace_with_symlink(const std::string& target, const std::string& link);

}  // namespace ringsafe::file

// The Hub's local cache, in huggingface_hub's layout (file_download.py):
//   CACHE/models--ORG--NAME/refs/REVISION          the commit a branch or tag was at
//   CACHE/models--ORG--NAME/blobs/ETAG             the file's bytes (ETag: sha256 for LFS, git sha1 otherwise)
//   CACHE/models--ORG--NAME/snapshots/COMMIT/PATH  -> ../../blobs/ETAG (relative symlink)
// Looking a file up (try_to_load_from_cache's rules) and writing one while it
// is read (hub_options::cache).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ringsafe/source.hpp"
#include "stores/hub_path.hpp"

namespace ringsafe::file {
class temp_file;
}

namespace ringsafe::stores {

// A file found in the cache.
struct cached_file {
    std::string local;   // CACHE/.../snapshots/COMMIT/PATH
    std::string commit;
    std::string path;    // in the repo (the checkpoint's file when `p` named none)
};

// The file `p` names in the cache at `cache_dir`: its revision through
// refs/REVISION (a commit is itself), then snapshots/COMMIT/PATH when that is
// a regular file (symlinks followed). A repo named without a path: the index
// when the snapshot holds it, else the single file. nullopt when not there.
std::optional<cached_file> find_in_hub_cache(const std::string& cache_dir, const hub_path& p);

// Where find_in_hub_cache looked, for messages: the snapshot file, or the
// refs file when the revision is not in the cache.
std::string hub_cache_place(const std::string& cache_dir, const hub_path& p);

// One file being written into the cache as it is read, shared by every source
// of that file in the process (a copy's two readers, a reader's own source):
// the bytes any of them read land in one temporary beside blobs/ETAG (O_TMPFILE
// where the filesystem has it: nothing at any path until published). Once
// every byte has landed it is published: fsync, linked as blobs/ETAG, then
// the snapshot's symlink and refs/REVISION (when the revision asked for is not
// the commit), each by rename. Never published in part: the temporary goes
// with the last source of the file.
class hub_cache_entry {
public:
    // The entry for `file` of `p`'s repo at `commit` (blob name `blob`, `size`
    // bytes; `revision` as asked for). Null when there is nothing to write:
    // the snapshot's file is there already, or the blob is (then the symlink
    // and ref are made now). Throws (naming the cache path) when the cache
    // cannot be written.
    static std::shared_ptr<hub_cache_entry> open(const std::string& cache_dir, const hub_path& p,
                                                 const std::string& file, const std::string& revision,
                                                 const std::string& commit, const std::string& blob,
                                                 std::uint64_t size);
    ~hub_cache_entry();
    hub_cache_entry(const hub_cache_entry&) = delete;
    hub_cache_entry& operator=(const hub_cache_entry&) = delete;

    // Bytes [offset, offset + bytes.size()) of the file, as read; publishes
    // when they complete it. Thread-safe. Throws naming the cache path.
    void write(std::uint64_t offset, std::span<const std::byte> bytes);
    bool published() const;
    const std::string& blob_path() const noexcept { return blob_; }

    // Use open(). Paths: the repo's folder in the cache, the blob's.
    hub_cache_entry(std::string repo_dir, std::string file, std::string revision, std::string commit,
                    std::string blob, std::uint64_t size);

private:
    void publish_locked();

    std::string repo_dir_, file_, revision_, commit_, blob_name_;
    std::string blob_;  // repo_dir_/blobs/blob_name_
    mutable std::shared_mutex mutex_;  // shared by the writes, exclusive for the ranges and the publish
    std::unique_ptr<file::temp_file> tmp_;
    std::map<std::uint64_t, std::uint64_t> have_;  // landed ranges [first, end), merged
    std::uint64_t size_ = 0;
    bool published_ = false;
};

// One execute()'s ops written into a cache entry as each completes (every one
// of its bytes landed, as on_bytes reports), on a thread of its own, so that
// the cache's writes overlap the rest of the download.
class hub_cache_tee {
public:
    hub_cache_tee(std::shared_ptr<hub_cache_entry> entry, std::span<const read_op> ops);
    // Without finish(): stops the thread, writing nothing more (a failed read).
    ~hub_cache_tee();
    hub_cache_tee(const hub_cache_tee&) = delete;
    hub_cache_tee& operator=(const hub_cache_tee&) = delete;

    // `bytes` more of ops[op] landed (io_control::on_bytes; any thread).
    void landed(std::size_t op, std::uint64_t bytes);
    // After the ops all completed: writes those the thread has not, joins it;
    // throws the first write's error.
    void finish();

private:
    void run();
    void stop();

    std::shared_ptr<hub_cache_entry> entry_;
    std::span<const read_op> ops_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> landed_;
    std::vector<char> written_;  // by the thread, read after it joined
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::size_t> ready_;
    bool stopping_ = false, abandoned_ = false;
    std::exception_ptr failed_;
    std::thread thread_;
};

// Links snapshots/COMMIT/FILE to blobs/BLOB (relative) and writes refs/REVISION
// (when it is not the commit), each atomically; nothing when already so.
void link_hub_snapshot(const std::string& repo_dir, const std::string& file, const std::string& revision,
                       const std::string& commit, const std::string& blob);

}  // namespace ringsafe::stores

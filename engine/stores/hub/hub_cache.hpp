// The Hub's local cache, in huggingface_hub's layout (file_download.py):
//   CACHE/models--ORG--NAME/refs/REVISION          the commit a branch or tag was at
//   CACHE/models--ORG--NAME/blobs/ETAG             the file's bytes (ETag: sha256 for LFS, git sha1 otherwise)
//   CACHE/models--ORG--NAME/snapshots/COMMIT/PATH  -> ../../blobs/ETAG (relative symlink)
// Looking a file up (try_to_load_from_cache's rules, links out of the cache
// refused) and writing one while it is read (hub_options::cache), published
// only when its bytes hash to the blob's name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <span>
#include <string>

#include "ringsafe/source.hpp"
#include "stores/hub/blob_digest.hpp"
#include "stores/hub/hub_path.hpp"

namespace ringsafe::file {
class temp_file;
}

namespace ringsafe::stores {

// A file found in the cache.
struct cached_file {
    std::string local;   // CACHE/.../snapshots/COMMIT/PATH
    std::string commit;
    std::string path;    // in the repo (the checkpoint's file when `p` named none)
    std::string blob;    // the blob it links to (CACHE/.../blobs/NAME, resolved); empty for a copied file
    std::string blob_name;
};

// The file `p` names in the cache at `cache_dir`: its revision through
// refs/REVISION (a commit is itself), then snapshots/COMMIT/PATH when it is a
// regular file, or a symlink that resolves to a regular file (not a symlink)
// in the repo's blobs/ folder; a link out of the cache finds nothing. A repo
// named without a path: the index when the snapshot holds it, else the single
// file. nullopt when not there.
std::optional<cached_file> find_in_hub_cache(const std::string& cache_dir, const hub_path& p);

// Where find_in_hub_cache looked, for messages: the snapshot file, or the
// refs file when the revision is not in the cache.
std::string hub_cache_place(const std::string& cache_dir, const hub_path& p);

// Hashes a found file's blob against its name (hub_options::verify always, `ringsafe verify`):
// throws ObjectChanged naming `url`, the blob and both hashes when they differ,
// and InvalidArgument when it links to no blob named by a hash.
void verify_cached_file(const cached_file& f, const std::string& url);

// One file being written into the cache as it is read, shared by every source
// of that file in the process (a copy's two readers, a reader's own source):
// the bytes any of them read land in one temporary beside blobs/BLOB (O_TMPFILE
// where the filesystem has it: nothing at any path until published), and in
// the digest of the hash BLOB names (blob_digest), the contiguous prefix as it
// grows. Once every byte has landed, the bytes not yet hashed (those that came
// after a gap another call filled) are hashed from the temporary, and the file
// is published only when its hash is its name: fsync, linked as blobs/BLOB,
// then the snapshot's symlink and refs/REVISION (when the revision asked for is
// not the commit), each by rename. Bytes of another hash are never published
// (digest() tells). Never published in part: the temporary goes with the last
// source of the file.
class hub_cache_entry {
public:
    // The entry for `file` of `p`'s repo at `commit` (blob name `blob`, a hash
    // blob_hash_of knows; `size` bytes; `revision` as asked for). Null when
    // there is nothing to write: the snapshot links to that blob already, or a
    // regular file blobs/BLOB of that size hashes to BLOB (then the symlink and
    // ref are made now). Throws (naming the cache path) when the cache cannot
    // be written: a path of it too long for the file system (ENAMETOOLONG, before
    // anything is written), a folder that cannot be made; InvalidArgument when
    // `blob` names no hash.
    static std::shared_ptr<hub_cache_entry> open(const std::string& cache_dir, const hub_path& p,
                                                 const std::string& file, const std::string& revision,
                                                 const std::string& commit, const std::string& blob,
                                                 std::uint64_t size);
    ~hub_cache_entry();
    hub_cache_entry(const hub_cache_entry&) = delete;
    hub_cache_entry& operator=(const hub_cache_entry&) = delete;

    // Bytes [offset, offset + bytes.size()) of the file, as read (in memory
    // until this returns): written, hashed when they reach the digest's prefix;
    // publishes when they complete the file and its hash is its name.
    // Thread-safe. Throws naming the cache path.
    void write(std::uint64_t offset, std::span<const std::byte> bytes);
    bool published() const;
    const std::string& blob_path() const noexcept { return blob_; }
    // The digest the bytes must match (shared with the sources that feed it).
    const std::shared_ptr<blob_digest>& digest() const noexcept { return digest_; }

    // Use open(). Paths: the repo's folder in the cache, the blob's.
    hub_cache_entry(std::string repo_dir, std::string file, std::string revision, std::string commit,
                    std::string blob, std::uint64_t size, std::shared_ptr<blob_digest> digest);

private:
    void complete_locked();

    std::string repo_dir_, file_, revision_, commit_, blob_name_;
    std::string blob_;  // repo_dir_/blobs/blob_name_
    std::string key_;   // in the process's registry of entries being written
    mutable std::shared_mutex mutex_;  // shared by the writes, exclusive for the ranges and the publish
    std::unique_ptr<file::temp_file> tmp_;
    std::map<std::uint64_t, std::uint64_t> have_;  // landed ranges [first, end), merged
    std::uint64_t size_ = 0;
    std::shared_ptr<blob_digest> digest_;
    bool published_ = false;
    bool rejected_ = false;  // complete, of another hash: nothing published
};

// Links snapshots/COMMIT/FILE to blobs/BLOB (relative; replacing anything else
// there) and writes refs/REVISION (when it is not the commit), each
// atomically; nothing when already so.
void link_hub_snapshot(const std::string& repo_dir, const std::string& file, const std::string& revision,
                       const std::string& commit, const std::string& blob);

}  // namespace ringsafe::stores

// The hash a Hub blob is named by, computed over the file's bytes in order as
// they arrive (the contiguous prefix as it grows), so that bytes read in
// parallel pieces are hashed while they are still in memory, with no second
// pass: the sha256 of an LFS file (X-Linked-Etag), git's blob id (the sha1 of
// "blob SIZE\0" + the bytes) of any other (ETag).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace ringsafe::stores {

enum class blob_hash { none, sha256, git_sha1 };

// What `name` is the hash of: 64 lower-case hex digits a sha256, 40 git's blob id; else none.
blob_hash blob_hash_of(std::string_view name);

// "sha256", "git blob sha1".
std::string_view blob_hash_name(blob_hash h);

class blob_digest {
public:
    // The digest of the blob `name` of `size` bytes; null when `name` is no hash blob_hash_of knows.
    static std::shared_ptr<blob_digest> for_blob(const std::string& name, std::uint64_t size);
    blob_digest(blob_hash kind, std::string name, std::uint64_t size);
    ~blob_digest();
    blob_digest(const blob_digest&) = delete;
    blob_digest& operator=(const blob_digest&) = delete;

    // Bytes [offset, offset + bytes.size()) of the file: hashes the part past
    // what is hashed when the range reaches it (what lies before is skipped);
    // a range starting past it is left (false). Thread-safe.
    bool add(std::uint64_t offset, std::span<const std::byte> bytes);
    // Hashes bytes [hashed(), size) read from `fd` (pread); throws naming `path`.
    void add_from_file(int fd, const std::string& path);

    std::uint64_t hashed() const;
    bool complete() const;
    // Once complete: the lower-case hex hash of the bytes, and whether it is the name.
    std::string hex() const;
    bool matches() const;
    const std::string& name() const noexcept { return name_; }
    blob_hash kind() const noexcept { return kind_; }
    std::uint64_t size() const noexcept { return size_; }

private:
    void update_locked(const void* data, std::size_t n);
    void finish_locked();

    const blob_hash kind_;
    const std::string name_;
    const std::uint64_t size_;
    mutable std::mutex mutex_;
    evp_md_ctx_st* ctx_ = nullptr;
    std::uint64_t hashed_ = 0;
    std::string hex_;  // once complete
};

// The hash of `kind` of the regular file `path`, opened without following a
// symlink at it (O_NOFOLLOW); throws (system category) naming the path.
std::string hash_blob_file(const std::string& path, blob_hash kind);

}  // namespace ringsafe::stores

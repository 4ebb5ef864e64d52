// Hub blob digests computed as the bytes arrive (blob_digest.hpp).
#include "stores/hub/blob_digest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "ringsafe/error.hpp"
#include "stores/digest.hpp"

namespace ringsafe::stores {

blob_hash blob_hash_of(std::string_view name) {
    if (name.size() != 64 && name.size() != 40) return blob_hash::none;
    if (name.find_first_not_of("0123456789abcdef") != std::string_view::npos) return blob_hash::none;
    return name.size() == 64 ? blob_hash::sha256 : blob_hash::git_sha1;
}

std::string_view blob_hash_name(blob_hash h) {
    return h == blob_hash::sha256 ? "sha256" : h == blob_hash::git_sha1 ? "git blob sha1" : "no hash";
}

std::shared_ptr<blob_digest> blob_digest::for_blob(const std::string& name, std::uint64_t size) {
    const blob_hash kind = blob_hash_of(name);
    if (kind == blob_hash::none) return nullptr;
    return std::make_shared<blob_digest>(kind, name, size);
}

blob_digest::blob_digest(blob_hash kind, std::string name, std::uint64_t size)
    : kind_(kind), name_(std::move(name)), size_(size), ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, kind == blob_hash::git_sha1 ? EVP_sha1() : EVP_sha256(), nullptr) != 1)
        raise(errc::IoError, "cannot start a " + std::string(blob_hash_name(kind)) + " digest (OpenSSL)");
    if (kind == blob_hash::git_sha1) {  // git hashes "blob SIZE\0" before the bytes
        const std::string head = "blob " + std::to_string(size);
        EVP_DigestUpdate(ctx_, head.c_str(), head.size() + 1);
    }
    if (size == 0) finish_locked();
}

blob_digest::~blob_digest() { EVP_MD_CTX_free(ctx_); }

void blob_digest::update_locked(const void* data, std::size_t n) {
    EVP_DigestUpdate(ctx_, data, n);
    hashed_ += n;
    if (hashed_ == size_) finish_locked();
}

void blob_digest::finish_locked() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    hex_ = stores::hex(std::string_view(reinterpret_cast<const char*>(md), n));
}

bool blob_digest::add(std::uint64_t offset, std::span<const std::byte> bytes) {
    std::lock_guard lock(mutex_);
    if (offset > hashed_) return false;
    const std::uint64_t end = std::min<std::uint64_t>(offset + bytes.size(), size_);
    if (end > hashed_) update_locked(bytes.data() + (hashed_ - offset), static_cast<std::size_t>(end - hashed_));
    return true;
}

void blob_digest::add_from_file(int fd, const std::string& path) {
    std::lock_guard lock(mutex_);
    std::vector<std::byte> buf(std::min<std::uint64_t>(size_ - hashed_, 4u << 20));
    while (hashed_ < size_) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size_ - hashed_));
        const ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(hashed_));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) raise_errno(errno, "reading '" + path + "' to hash it", path);
        if (n == 0) raise(errc::Truncated, "'" + path + "' ended at byte " + std::to_string(hashed_) + " of " +
                                               std::to_string(size_) + " while it was hashed");
        update_locked(buf.data(), static_cast<std::size_t>(n));
    }
}

std::uint64_t blob_digest::hashed() const {
    std::lock_guard lock(mutex_);
    return hashed_;
}

bool blob_digest::complete() const {
    std::lock_guard lock(mutex_);
    return hashed_ == size_;
}

std::string blob_digest::hex() const {
    std::lock_guard lock(mutex_);
    return hex_;
}

bool blob_digest::matches() const {
    std::lock_guard lock(mutex_);
    return hashed_ == size_ && hex_ == name_;
}

std::string hash_blob_file(const std::string& path, blob_hash kind) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) raise_errno(errno, "opening '" + path + "' to hash it", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        raise_errno(EINVAL, "'" + path + "' is not a regular file", path);
    }
    try {
        blob_digest d(kind, {}, static_cast<std::uint64_t>(st.st_size));
        d.add_from_file(fd, path);
        ::close(fd);
        return d.hex();
    } catch (...) {
        ::close(fd);
        throw;
    }
}

}  // namespace ringsafe::stores

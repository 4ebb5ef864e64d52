// Local header reading (open + pread) and chunked per-tensor SHA-256.
#include "header_file.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"

namespace ringsafe::cli {
namespace {

std::string to_hex(const unsigned char* md, unsigned len) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    s.reserve(2 * len);
    for (unsigned i = 0; i < len; ++i) s += digits[md[i] >> 4], s += digits[md[i] & 15];
    return s;
}

}  // namespace

header_file::header_file(const std::string& path, const parse_options& opts) : path_(path) {
    if (is_url(path)) {
        source_options so;
        apply_environment_credentials(path, so.http);  // HF_TOKEN for the Hub
        remote_ = open_source(path, so);
        size_ = remote_->size();
    } else {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) raise_errno(errno, "cannot open '" + path + "'");
        struct stat st {};
        if (::fstat(fd_, &st) != 0) {
            int err = errno;
            ::close(fd_);
            raise_errno(err, "cannot stat '" + path + "'");
        }
        size_ = static_cast<std::uint64_t>(st.st_size);
    }
    try {
        std::byte prefix[8] = {};
        read_at(prefix, size_ < 8 ? static_cast<std::size_t>(size_) : 8, 0, "the length prefix");
        std::uint64_t n = parse_length_prefix(prefix, size_, opts);
        std::string json(static_cast<std::size_t>(n), '\0');
        read_at(json.data(), json.size(), 8, "the header");
        header_ = parse_header(json, size_, opts);
    } catch (...) {
        if (fd_ >= 0) ::close(fd_);
        throw;
    }
}

header_file::~header_file() {
    if (fd_ >= 0) ::close(fd_);
}

void header_file::read_at(void* buf, std::size_t len, std::uint64_t offset, const char* what) const {
    if (remote_) {  // the source's errors name the URL and range
        if (offset > size_ || len > size_ - offset)
            raise(errc::Truncated, "'" + path_ + "' ended at offset " + std::to_string(size_) + " while reading " + what);
        auto first = remote_->prefix();  // fetched by the open: a header inside it costs no request
        if (offset <= first.size() && len <= first.size() - offset)
            std::memcpy(buf, first.data() + offset, len);
        else
            remote_->read_exact(offset, {static_cast<std::byte*>(buf), len});
        return;
    }
    auto* p = static_cast<char*>(buf);
    while (len > 0) {
        ssize_t got = ::pread(fd_, p, len, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) raise_errno(errno, "reading " + std::string(what) + " of '" + path_ + "' at offset " + std::to_string(offset));
        if (got == 0)
            raise(errc::Truncated, "'" + path_ + "' ended at offset " + std::to_string(offset) + " while reading " + what);
        p += got, len -= static_cast<std::size_t>(got), offset += static_cast<std::uint64_t>(got);
    }
}

std::vector<std::string> header_file::sha256_per_tensor(std::size_t chunk) const {
    const auto& tensors = header_.tensors;
    std::vector<std::string> out;
    out.reserve(tensors.size());
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx) raise(errc::IoError, "cannot create a SHA-256 context");
    if (fd_ >= 0) ::posix_fadvise(fd_, static_cast<off_t>(header_.data_start()), 0, POSIX_FADV_SEQUENTIAL);
    std::vector<unsigned char> buf(chunk);
    // Tensors are contiguous in data order, so one front-to-back pass feeds each in turn.
    std::size_t t = 0;
    std::uint64_t pos = 0;  // data offset of buf[0]
    bool open = false;
    auto finish_empty_and_done = [&](std::uint64_t upto) {
        // Closes every tensor that ends at or before `upto`.
        while (t < tensors.size() && tensors[t].end <= upto) {
            if (!open) EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
            unsigned char md[EVP_MAX_MD_SIZE];
            unsigned len = 0;
            EVP_DigestFinal_ex(ctx.get(), md, &len);
            out.push_back(to_hex(md, len));
            open = false;
            ++t;
        }
    };
    finish_empty_and_done(0);
    while (pos < header_.data_size) {
        std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, header_.data_size - pos));
        read_at(buf.data(), len, header_.data_start() + pos, ("the data of tensor '" + tensors[t].name + "'").c_str());
        std::uint64_t end = pos + len;
        std::uint64_t at = pos;
        while (t < tensors.size() && at < end) {
            if (!open) EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr), open = true;
            std::uint64_t stop = std::min(end, tensors[t].end);
            EVP_DigestUpdate(ctx.get(), buf.data() + (at - pos), static_cast<std::size_t>(stop - at));
            at = stop;
            finish_empty_and_done(at);
        }
        pos = end;
    }
    return out;
}

}  // namespace ringsafe::cli

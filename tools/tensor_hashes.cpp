// Listing and hashing a checkpoint through the reader.
#include "tensor_hashes.hpp"

#include <openssl/evp.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <future>
#include <memory>

namespace ringsafe::cli {
namespace {

// A piece of one tensor's bytes inside a batch buffer.
struct window {
    std::uint32_t tensor;
    std::uint64_t start, stop;
    std::uint64_t at;  // offset in the batch buffer
};

// Cuts the data of every tensor, in order, into batches of windows, one batch
// at a time.
class batch_cutter {
public:
    batch_cutter(std::span<const tensor_info> tensors, std::uint64_t batch, std::size_t max_pieces)
        : tensors_(tensors), batch_(batch), max_pieces_(max_pieces) {}

    bool done() const noexcept { return tensor_ == tensors_.size(); }

    // The next batch's windows (a zero-size tensor is one empty window).
    std::vector<window> next() {
        std::vector<window> out;
        std::uint64_t used = 0;
        while (!done() && out.size() < max_pieces_) {
            const std::uint64_t size = tensors_[tensor_].size();
            const std::uint64_t n = std::min(size - pos_, batch_ - used);
            if (n == 0 && size != 0) break;  // the buffer is full
            out.push_back({tensor_, pos_, pos_ + n, used});
            used += n;
            pos_ += n;
            if (pos_ == size) ++tensor_, pos_ = 0;
        }
        return out;
    }

private:
    std::span<const tensor_info> tensors_;
    std::uint64_t batch_;
    std::size_t max_pieces_;
    std::uint32_t tensor_ = 0;
    std::uint64_t pos_ = 0;
};

}  // namespace

std::string hex_digest(const sha256_digest& md) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(2 * md.size(), '0');
    for (std::size_t i = 0; i < md.size(); ++i) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    return out;
}

listing listing_of(const reader& r) {
    listing l;
    l.tensors = r.tensors();
    l.metadata = &r.metadata();
    for (auto& s : r.shards()) l.header_size += s.format == file_format::gguf ? s.data_start : s.data_start - 8;
    l.data_size = r.total_bytes();
    return l;
}

digest_store::digest_store(std::size_t tensors, std::size_t in_memory) {
    if (tensors > in_memory) {
        const char* dir = std::getenv("TMPDIR");
        for (const char* d : {dir && *dir ? dir : "/tmp", "/tmp"}) {
            const int fd = ::open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
            if (fd < 0) continue;
            if ((file_ = ::fdopen(fd, "w+b"))) break;
            ::close(fd);
        }
    }
    if (!file_) memory_.reserve(tensors);
}

digest_store::~digest_store() {
    if (file_) std::fclose(file_);
}

void digest_store::append(const sha256_digest& d) {
    if (!file_) return memory_.push_back(d);
    if (std::fwrite(d.data(), d.size(), 1, file_) != 1)
        raise_errno(errno, "writing the tensors' digests to a temporary file");
}

void digest_store::rewind() {
    read_ = 0;
    if (file_ && (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0))
        raise_errno(errno, "rewinding the temporary file of the tensors' digests");
}

sha256_digest digest_store::next() {
    if (!file_) return memory_.at(read_++);
    sha256_digest d{};
    if (std::fread(d.data(), d.size(), 1, file_) != 1)
        raise(errc::IoError, "the temporary file of the tensors' digests ends early");
    ++read_;
    return d;
}

void sha256_per_tensor(reader& r, digest_store& out, std::uint64_t batch, std::size_t max_pieces) {
    const auto tensors = r.tensors();
    batch = std::max<std::uint64_t>(1, std::min(batch, r.total_bytes()));
    batch_cutter cut(tensors, batch, std::max<std::size_t>(1, max_pieces));
    std::vector<std::byte> buf[2] = {std::vector<std::byte>(batch), std::vector<std::byte>(batch)};
    auto read_batch = [&](const std::vector<window>& windows, std::vector<std::byte>& into) {
        std::vector<read_request> reqs;
        reqs.reserve(windows.size());
        for (const window& w : windows) {
            if (w.stop == w.start) continue;
            read_request q;
            q.tensor = tensors[w.tensor].name;
            q.bytes = dim_range{w.start, w.stop};
            q.dst = std::span(into).subspan(w.at, w.stop - w.start);
            reqs.push_back(std::move(q));
        }
        r.execute(r.plan(reqs));
    };

    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::vector<window> windows[2];
    windows[0] = cut.next();
    std::future<void> pending = std::async(std::launch::async, read_batch, std::cref(windows[0]), std::ref(buf[0]));
    for (std::size_t k = 0;; ++k) {
        pending.get();
        const std::size_t cur = k % 2, nxt = 1 - cur;
        if (!cut.done()) {
            windows[nxt] = cut.next();
            pending = std::async(std::launch::async, read_batch, std::cref(windows[nxt]), std::ref(buf[nxt]));
        }
        for (const window& w : windows[cur]) {
            if (w.start == 0) EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
            EVP_DigestUpdate(ctx.get(), buf[cur].data() + w.at, w.stop - w.start);
            if (w.stop == tensors[w.tensor].size()) {
                sha256_digest d;
                unsigned len = 0;
                EVP_DigestFinal_ex(ctx.get(), d.data(), &len);
                out.append(d);
            }
        }
        if (!pending.valid()) break;
    }
}

}  // namespace ringsafe::cli

// Listing and hashing a checkpoint through the reader.
#include "tensor_hashes.hpp"

#include <openssl/evp.h>

#include <algorithm>
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

std::string hex(const unsigned char* md, unsigned len) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
}

}  // namespace

header listing_header(const reader& r) {
    header h;
    h.tensors.assign(r.tensors().begin(), r.tensors().end());
    h.metadata = r.metadata();
    for (auto& s : r.shards()) h.header_size += s.data_start - 8;
    h.data_size = r.total_bytes();
    h.build_name_index();
    return h;
}

std::vector<std::string> sha256_per_tensor(reader& r, std::uint64_t batch) {
    const auto tensors = r.tensors();
    batch = std::max<std::uint64_t>(1, std::min(batch, r.total_bytes()));
    // Cut the data of every tensor, in order, into batches of windows.
    std::vector<std::vector<window>> batches(1);
    std::uint64_t used = 0;
    for (std::uint32_t i = 0; i < tensors.size(); ++i) {
        const std::uint64_t size = tensors[i].size();
        if (size == 0) batches.back().push_back({i, 0, 0, used});
        for (std::uint64_t pos = 0; pos < size;) {
            if (used == batch) batches.emplace_back(), used = 0;
            const std::uint64_t n = std::min(size - pos, batch - used);
            batches.back().push_back({i, pos, pos + n, used});
            used += n;
            pos += n;
        }
    }
    std::vector<std::byte> buf[2] = {std::vector<std::byte>(batch), std::vector<std::byte>(batch)};
    auto read_batch = [&](std::size_t k) {
        std::vector<read_request> reqs;
        reqs.reserve(batches[k].size());
        for (const window& w : batches[k]) {
            if (w.stop == w.start) continue;
            read_request q;
            q.tensor = tensors[w.tensor].name;
            q.bytes = dim_range{w.start, w.stop};
            q.dst = std::span(buf[k % 2]).subspan(w.at, w.stop - w.start);
            reqs.push_back(std::move(q));
        }
        r.execute(r.plan(reqs));
    };

    std::vector<std::string> out(tensors.size());
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::future<void> pending = std::async(std::launch::async, read_batch, 0);
    for (std::size_t k = 0; k < batches.size(); ++k) {
        pending.get();
        if (k + 1 < batches.size()) pending = std::async(std::launch::async, read_batch, k + 1);
        for (const window& w : batches[k]) {
            if (w.start == 0) EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
            EVP_DigestUpdate(ctx.get(), buf[k % 2].data() + w.at, w.stop - w.start);
            if (w.stop == tensors[w.tensor].size()) {
                unsigned char md[EVP_MAX_MD_SIZE];
                unsigned len = 0;
                EVP_DigestFinal_ex(ctx.get(), md, &len);
                out[w.tensor] = hex(md, len);
            }
        }
    }
    return out;
}

}  // namespace ringsafe::cli

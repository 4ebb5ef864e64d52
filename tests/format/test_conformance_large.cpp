// Generated large conformance cases (../shared/conformance/README.md, "Large
// files"): 64 MiB tensors back to back, a sparse 1 GiB tensor, and the
// 100,000,000-byte header limit.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "ringsafe/header.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
};

// Reads only the prefix and the N header bytes of `path` and parses them.
header parse_path(const std::filesystem::path& path, const parse_options& opts = {}) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    fd_closer closer{fd};
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    std::byte prefix[8] = {};
    REQUIRE(::pread(fd, prefix, 8, 0) == 8);
    std::uint64_t n = parse_length_prefix(prefix, static_cast<std::uint64_t>(st.st_size), opts);
    std::string json(n, '\0');
    REQUIRE(::pread(fd, json.data(), n, 8) == static_cast<ssize_t>(n));
    return parse_header(json, static_cast<std::uint64_t>(st.st_size), opts);
}

class sha256 {
public:
    sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
    void update(std::span<const std::byte> b) { EVP_DigestUpdate(ctx_.get(), b.data(), b.size()); }
    std::string hex() {
        unsigned char md[32];
        unsigned len = 0;
        EVP_DigestFinal_ex(ctx_.get(), md, &len);
        static const char* digits = "0123456789abcdef";
        std::string s;
        for (unsigned i = 0; i < len; ++i) s += digits[md[i] >> 4], s += digits[md[i] & 15];
        return s;
    }

private:
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// Writes prefix + `json` padded with spaces to a multiple of 8.
void write_header(std::FILE* f, std::string json) {
    json.append((8 - json.size() % 8) % 8, ' ');
    std::byte prefix[8];
    encode_length_prefix(json.size(), prefix);
    REQUIRE(std::fwrite(prefix, 1, 8, f) == 8);
    REQUIRE(std::fwrite(json.data(), 1, json.size(), f) == json.size());
}

// A file of `spaces` + 2 header bytes: `{}` then spaces, N counting both.
void write_braces_and_spaces(const std::filesystem::path& p, std::uint64_t n) {
    std::string file(8 + n, ' ');
    encode_length_prefix(n, reinterpret_cast<std::byte*>(file.data()));
    file[8] = '{', file[9] = '}';
    write_file(p, file);
}

}  // namespace

TEST_CASE("three 64 MiB F32 tensors back to back") {
    temp_dir dir;
    auto path = dir / "big.safetensors";
    constexpr std::uint64_t size = 67108864;
    constexpr int count = 3;
    std::string json = "{";
    for (int k = 0; k < count; ++k) {
        if (k) json += ',';
        json.append("\"w").append(std::to_string(k));
        json.append("\":{\"dtype\":\"F32\",\"shape\":[4096,4096],\"data_offsets\":[");
        json.append(std::to_string(k * size)).append(",").append(std::to_string((k + 1) * size)).append("]}");
    }
    json += "}";
    std::vector<std::string> hashes;
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        REQUIRE(f);
        write_header(f, json);
        std::vector<std::byte> chunk(1 << 20);
        for (int k = 0; k < count; ++k) {
            sha256 h;
            for (std::uint64_t off = 0; off < size; off += chunk.size()) {
                fill_pattern(chunk, static_cast<std::uint64_t>(k), off);
                h.update(chunk);
                REQUIRE(std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size());
            }
            hashes.push_back(h.hex());
        }
        REQUIRE(std::fclose(f) == 0);
    }
    header h = parse_path(path);
    REQUIRE(h.tensors.size() == count);
    CHECK(h.data_size == count * size);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    fd_closer closer{fd};
    std::vector<std::byte> chunk(4 << 20);
    for (int k = 0; k < count; ++k) {
        const tensor_info& t = h.tensors[static_cast<std::size_t>(k)];
        std::string name = "w";
        name += std::to_string(k);
        CHECK(t.name == name);
        CHECK(t.dtype == dtype::F32);
        CHECK(t.shape == std::vector<std::uint64_t>{4096, 4096});
        CHECK(t.begin == k * size);
        sha256 sum;
        for (std::uint64_t off = 0; off < t.size(); off += chunk.size()) {
            auto got = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(h.data_start() + t.begin + off));
            REQUIRE(got == static_cast<ssize_t>(chunk.size()));
            sum.update(chunk);
        }
        CHECK(sum.hex() == hashes[static_cast<std::size_t>(k)]);
    }
}

TEST_CASE("a sparse 1 GiB tensor validates from its header alone") {
    temp_dir dir;
    auto path = dir / "sparse.safetensors";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    write_header(f, R"({"zeros":{"dtype":"U8","shape":[1073741824],"data_offsets":[0,1073741824]}})");
    REQUIRE(std::fclose(f) == 0);
    auto header_end = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, header_end + (std::uint64_t{1} << 30));
    header h = parse_path(path);
    REQUIRE(h.tensors.size() == 1);
    CHECK(h.tensors[0].size() == std::uint64_t{1} << 30);
    CHECK(h.file_size() == std::filesystem::file_size(path));
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(st.st_blocks * 512 < (1 << 20));  // still sparse: nothing was written into the data
}

TEST_CASE("the 100,000,000-byte header limit, and a configurable limit") {
    temp_dir dir;
    auto at_limit = dir / "at_limit.safetensors", above = dir / "above.safetensors";
    write_braces_and_spaces(at_limit, 100'000'000);
    header h = parse_path(at_limit);
    CHECK(h.tensors.empty());
    CHECK_FALSE(h.metadata);
    CHECK(h.header_size == 100'000'000);

    write_braces_and_spaces(above, 100'000'001);
    try {
        parse_path(above);
        FAIL("accepted");
    } catch (const error& e) {
        CHECK(e.code() == errc::HeaderTooLarge);
    }
    parse_options lower{.max_header_size = 99'999'999}, higher{.max_header_size = 100'000'001};
    CHECK_THROWS_MATCHES(parse_path(at_limit, lower), error,
                         Catch::Matchers::Predicate<error>([](const error& e) { return e.code() == errc::HeaderTooLarge; }));
    CHECK(parse_path(above, higher).header_size == 100'000'001);
}

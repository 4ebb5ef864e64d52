// Generating the benchmark checkpoint and laying out each case's ranges.
#include "bench_checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "ringsafe/dtype.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::bench {
namespace {

std::uint64_t mix(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void write_all(int fd, const void* p, std::size_t n, const std::string& path) {
    auto* b = static_cast<const char*>(p);
    while (n) {
        ssize_t w = ::write(fd, b, n);
        if (w <= 0) throw std::runtime_error("write " + path + ": " + std::strerror(errno));
        b += w, n -= static_cast<std::size_t>(w);
    }
}

}  // namespace

std::byte content_byte(std::uint64_t x) { return static_cast<std::byte>(mix(x >> 3) >> ((x & 7) * 8)); }

bench_checkpoint make_checkpoint(const std::string& path, std::uint64_t target_bytes) {
    std::mt19937_64 rng(20261122);
    std::vector<tensor_entry> entries;
    std::vector<std::uint64_t> row_bytes;
    std::uint64_t pos = 0;
    auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return lo + rng() % (hi - lo + 1); };
    while (pos < target_bytes) {
        const unsigned kind = static_cast<unsigned>(rng() % 20);
        tensor_entry e;
        e.name = "model.layers." + std::to_string(entries.size() / 8) + ".w" + std::to_string(entries.size() % 8);
        std::uint64_t rows, cols, esize;
        if (kind < 3) {  // large 2-D: 16-48 MiB
            e.dtype = dtype::BF16, esize = 2, rows = pick(2048, 6144), cols = pick(2048, 4096) | 1;
        } else if (kind < 14) {  // medium 2-D: 0.25-8 MiB
            e.dtype = kind % 2 ? dtype::F16 : dtype::F32, esize = kind % 2 ? 2 : 4;
            rows = pick(256, 1536), cols = pick(512, 1536) | 1;
        } else {  // small 1-D (norms, biases)
            e.dtype = dtype::F32, esize = 4, rows = 1, cols = pick(1000, 60000);
        }
        e.shape = rows == 1 ? std::vector<std::uint64_t>{cols} : std::vector<std::uint64_t>{rows, cols};
        e.begin = pos;
        e.end = pos + rows * cols * esize;
        pos = e.end;
        row_bytes.push_back(rows == 1 ? e.end - e.begin : cols * esize);
        entries.push_back(std::move(e));
    }
    const std::string json = serialize_header(entries, nullptr);
    bench_checkpoint c;
    c.path = path;
    c.data_start = 8 + json.size();
    c.file_size = c.data_start + pos;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto& e = entries[i];
        const std::uint64_t rows = e.shape.size() == 2 ? e.shape[0] : 1;
        c.tensors.push_back({e.name, c.data_start + e.begin, e.end - e.begin, rows, row_bytes[i]});
    }

    // Reuse a file from an earlier run when it has the same size and header.
    std::string head(8 + json.size(), '\0');
    std::uint64_t n = json.size();
    for (int b = 0; b < 8; ++b) head[static_cast<std::size_t>(b)] = static_cast<char>(n >> (8 * b));
    std::memcpy(head.data() + 8, json.data(), json.size());
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == c.file_size) {
        int fd = ::open(path.c_str(), O_RDONLY);
        std::string old(head.size(), '\0');
        bool same = fd >= 0 && ::pread(fd, old.data(), old.size(), 0) == static_cast<ssize_t>(old.size()) && old == head;
        if (fd >= 0) ::close(fd);
        if (same) return c;
    }
    const std::string tmp = path + ".partial";
    int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error("create " + tmp + ": " + std::strerror(errno));
    write_all(fd, head.data(), head.size(), tmp);
    std::vector<std::byte> buf(8u << 20);
    for (std::uint64_t off = c.data_start; off < c.file_size;) {
        const std::uint64_t len = std::min<std::uint64_t>(buf.size(), c.file_size - off);
        for (std::uint64_t k = 0; k < len; ++k) buf[k] = content_byte(off + k);
        write_all(fd, buf.data(), len, tmp);
        off += len;
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("fsync " + tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("rename " + tmp);
    return c;
}

std::uint64_t place_congruent(std::vector<bench_range>& ranges) {
    std::uint64_t cursor = 8192;
    for (auto& r : ranges) {
        std::uint64_t p = cursor + ((r.offset % 4096) + 4096 - cursor % 4096) % 4096;
        r.at = p;
        cursor = p + r.length;
    }
    return cursor + 8192;
}

std::vector<bench_range> full_ranges(const bench_checkpoint& c) {
    std::vector<bench_range> out;
    for (const auto& t : c.tensors) out.push_back({t.name, t.offset, t.size, 0, 0, 0});
    return out;
}

std::vector<bench_range> scattered_ranges(const bench_checkpoint& c, unsigned every) {
    std::vector<bench_range> out;
    for (std::size_t i = 3; i < c.tensors.size(); i += every)
        out.push_back({c.tensors[i].name, c.tensors[i].offset, c.tensors[i].size, 0, 0, 0});
    return out;
}

std::vector<bench_range> row_ranges(const bench_checkpoint& c, unsigned rank, unsigned ranks) {
    std::vector<bench_range> out;
    for (const auto& t : c.tensors) {
        if (t.rows < ranks) {  // 1-D tensors are replicated: every rank reads them whole
            out.push_back({t.name, t.offset, t.size, 0, 0, 0});
            continue;
        }
        const std::uint64_t b = t.rows * rank / ranks, e = t.rows * (rank + 1) / ranks;
        out.push_back({t.name, t.offset + b * t.row_bytes, (e - b) * t.row_bytes, b, e, 0});
    }
    return out;
}

}  // namespace ringsafe::bench

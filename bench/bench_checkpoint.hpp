// The benchmark's generated checkpoint and the byte ranges each case reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringsafe::bench {

// One tensor of the generated checkpoint (absolute file offsets).
struct bench_tensor {
    std::string name;
    std::uint64_t offset = 0;     // file offset of its first byte
    std::uint64_t size = 0;       // bytes
    std::uint64_t rows = 1;       // dimension 0 (1 for 1-D tensors: not split between ranks)
    std::uint64_t row_bytes = 0;  // bytes per row
};

struct bench_checkpoint {
    std::string path;
    std::uint64_t file_size = 0;
    std::uint64_t data_start = 0;
    std::vector<bench_tensor> tensors;
};

// Byte at absolute file offset `x` of the generated file's data section.
std::byte content_byte(std::uint64_t x);

// Writes (or reuses, when the file at `path` already has the same header and
// size) a checkpoint of about `target_bytes` with a few hundred tensors of
// mixed sizes and dtypes whose offsets are not 4 KiB-aligned, using plain
// write() and ringsafe::serialize_header. fsync()s a new file.
bench_checkpoint make_checkpoint(const std::string& path, std::uint64_t target_bytes);

// One range of a case: file bytes [offset, +length) into arena offset `at`.
struct bench_range {
    std::string tensor;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint64_t row_begin = 0, row_end = 0;  // rows of dim 0 (row-slice cases); 0,0 = whole tensor
    std::uint64_t at = 0;
};

// Places ranges in one arena so each lands at an address congruent to its file
// offset mod 4096 (the layout an O_DIRECT loader wants: padding < 4 KiB per
// range, and file-adjacent ranges stay adjacent in memory). Returns the arena
// size needed (with 8 KiB slack at both ends for aligned covers).
std::uint64_t place_congruent(std::vector<bench_range>& ranges);

// Ranges of the cases: all tensors; every tenth tensor; rows of rank `rank` of `ranks`.
std::vector<bench_range> full_ranges(const bench_checkpoint& c);
std::vector<bench_range> scattered_ranges(const bench_checkpoint& c, unsigned every);
std::vector<bench_range> row_ranges(const bench_checkpoint& c, unsigned rank, unsigned ranks);

}  // namespace ringsafe::bench

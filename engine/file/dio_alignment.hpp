// O_DIRECT alignment of an open file (engine-internal).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ringsafe::file {

// What O_DIRECT requires of reads on one file.
struct dio_alignment {
    std::uint32_t offset = 4096;  // file offsets and lengths must be multiples of this
    std::uint32_t memory = 4096;  // buffer addresses must be multiples of this
};

// Asks the kernel (statx STATX_DIOALIGN, kernel 6.1+); else the logical block
// size of a block device (ioctl BLKSSZGET); else 4096 for both. Throws
// ringsafe::error(InvalidArgument) naming `path` when statx reports that the
// file does not support O_DIRECT.
dio_alignment query_dio_alignment(int fd, const std::string& path);

// The two halves of query_dio_alignment: the alignment a statx result with STATX_DIOALIGN
// reports (nullopt when it does not; the same InvalidArgument when the file
// does not support O_DIRECT), and the answer without statx.
std::optional<dio_alignment> dio_alignment_from(const struct statx& sx, const std::string& path);
dio_alignment dio_alignment_without_statx(int fd);

}  // namespace ringsafe::file

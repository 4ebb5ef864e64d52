// Reservation overflow: the header needs more room than was reserved, so the
// data section moves once, in the kernel, before the header is written.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <cerrno>

#include "format/alignment.hpp"
#include "write/stream_writer.hpp"

namespace ringsafe {

using namespace write;
using file::temp_file;

namespace write {

std::string relocate_data(temp_file& tmp, const std::string& path, std::uint64_t data_start, std::uint64_t new_start,
                          std::uint64_t data_size, bool in_place) {
    std::uint64_t extra = new_start - data_start;
    if (in_place && ::fallocate(tmp.fd(), FALLOC_FL_INSERT_RANGE, static_cast<off_t>(data_start),
                                static_cast<off_t>(extra)) == 0)
        return "insert_range";  // the filesystem shifted the data's extents; no byte was copied
    // Copy the data section into a new temporary behind a larger header. The
    // source is reopened without O_DIRECT so the in-kernel copy may read the
    // unaligned tail.
    std::string proc = "/proc/self/fd/" + std::to_string(tmp.fd());
    int src = ::open(proc.c_str(), O_RDONLY | O_CLOEXEC);
    if (src < 0) raise_errno(errno, "reopening the temporary of '" + path + "' for relocation");
    try {
        temp_file dst(path, false);
        loff_t in = static_cast<loff_t>(data_start), out = static_cast<loff_t>(new_start);
        std::uint64_t left = data_size;
        while (left) {
            ssize_t n = ::copy_file_range(src, &in, dst.fd(), &out, left, 0);
            if (n < 0) {
                if (errno == EINTR) continue;
                raise_errno(errno, "relocating the data of '" + path + "' with copy_file_range (source offset " +
                                       std::to_string(in) + ")",
                            path);
            }
            if (n == 0)
                raise(errc::Truncated, "relocating the data of '" + path + "': the temporary ended at offset " +
                                           std::to_string(in));
            left -= static_cast<std::uint64_t>(n);
        }
        ::close(src);
        src = -1;
        tmp.adopt(dst);
    } catch (...) {
        if (src >= 0) ::close(src);
        throw;
    }
    return "copy_file_range";
}

}  // namespace write

void writer::impl::relocate(std::uint64_t json_size, std::uint64_t data_size) {
    constexpr std::uint64_t page = 4096;
    std::uint64_t new_start = format::align_up(8 + json_size, page);
    std::uint64_t old_start = data_start;
    data_start = new_start;
    reserved = new_start - 8;
    if (data_size == 0) return;  // nothing to move: the header simply grows
    stats.relocation = relocate_data(*tmp, path, old_start, new_start, data_size, opts.relocate_in_place);
    if (stats.relocation == "copy_file_range") stats.relocated_bytes = data_size;
}

}  // namespace ringsafe

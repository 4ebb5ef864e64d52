// O_DIRECT alignment query: statx STATX_DIOALIGN, BLKSSZGET, or 4096.
#include "file/dio_alignment.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "ringsafe/error.hpp"

namespace ringsafe::file {

std::optional<dio_alignment> dio_alignment_from([[maybe_unused]] const struct statx& sx,
                                                [[maybe_unused]] const std::string& path) {
#ifdef STATX_DIOALIGN
    if (!(sx.stx_mask & STATX_DIOALIGN)) return std::nullopt;
    if (sx.stx_dio_offset_align == 0 || sx.stx_dio_mem_align == 0)
        raise(errc::InvalidArgument, path + ": the filesystem does not support O_DIRECT for this file "
                                            "(open it with direct = false to read through the page cache)");
    return dio_alignment{sx.stx_dio_offset_align, sx.stx_dio_mem_align};
#else
    return std::nullopt;
#endif
}

dio_alignment dio_alignment_without_statx(int fd) {
    dio_alignment a;
    struct stat st {};
    int sector = 0;
    if (::fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) && ::ioctl(fd, BLKSSZGET, &sector) == 0 && sector > 0)
        a.offset = a.memory = static_cast<std::uint32_t>(sector);
    return a;
}

dio_alignment query_dio_alignment(int fd, const std::string& path) {
#ifdef STATX_DIOALIGN
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN | STATX_TYPE, &sx) == 0)
        if (auto a = dio_alignment_from(sx, path)) return *a;
#endif
    return dio_alignment_without_statx(fd);
}

}  // namespace ringsafe::file

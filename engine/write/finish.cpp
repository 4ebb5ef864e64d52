// Publishing a new file: finish() (writer::impl::finish_new) and its steps after the
// data is flushed, which the async writer (engine/asio/finish_operation.cpp)
// runs too, with ring operations in place of the blocking calls.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "write/stream_writer.hpp"

namespace ringsafe {

using namespace write;

void writer::impl::finish_new(const metadata_map* metadata) {
    std::uint64_t logical_end = stream->position();
    stream->flush();
    if (seal(metadata, logical_end)) relocate(sealed_json, sealed_data);
    stream.reset();
    std::string header = header_text(metadata);
    auto block = header_block(header);
    pwrite_all(tmp->fd(), block.get(), 8 + header.size(), 0, "writing the header of '" + path + "'", path);
    published_sizes();
    tmp->publish(opts.sync, opts.sync_dir);
}

bool writer::impl::seal(const metadata_map* metadata, std::uint64_t logical_end) {
    sealed_data = logical_end - data_start;
    stats.staged_bytes = stream->staged_bytes();
    stats.zero_copy_bytes = stream->zero_copy_bytes();
    stats.staging_peak = stream->staging_peak();
    sealed_json = serialized_json_size(entries, metadata);
    if (sealed_json > opts.max_header_size)
        raise(errc::HeaderTooLarge, "the header of '" + path + "' needs " + std::to_string(sealed_json) +
                                        " bytes, above the " + std::to_string(opts.max_header_size) + "-byte limit");
    // A zero-padded last O_DIRECT block, and space fallocated ahead, are cut back to the real end.
    if (tmp->direct() && ::ftruncate(tmp->fd(), static_cast<off_t>(logical_end)) != 0)
        raise_errno(errno, "truncating '" + path + "' to " + std::to_string(logical_end) + " bytes", path);
    if (sealed_json <= reserved) return false;
    if (opts.strict_reservation)
        raise(errc::ReservationExceeded, "the header of '" + path + "' needs " + std::to_string(sealed_json) +
                                             " bytes but " + std::to_string(reserved) +
                                             " were reserved (strict_reservation)");
    return true;
}

std::string writer::impl::header_text(const metadata_map* metadata) const {
    serialize_options so;
    so.pad_to = reserved;
    return serialize_header(entries, metadata, so);
}

void writer::impl::published_sizes() {
    stats.header_reserved = reserved;
    stats.header_json = sealed_json;
    stats.file_size = data_start + sealed_data;
}

}  // namespace ringsafe

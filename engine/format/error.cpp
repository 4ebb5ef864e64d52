// The ringsafe::errc category and the throwing helpers.
#include "ringsafe/error.hpp"

#include <array>
#include <cstring>

namespace ringsafe {
namespace {

constexpr std::array<std::string_view, 24> kind_names{
    "Ok",
    "HeaderTooSmall",
    "HeaderTooLarge",
    "InvalidHeaderLength",
    "InvalidHeader",
    "InvalidHeaderDeserialization",
    "InvalidOffset",
    "ValidationOverflow",
    "MisalignedSlice",
    "TensorInvalidInfo",
    "MetadataIncompleteBuffer",
    "DuplicateTensorName",
    "TensorNotFound",
    "InvalidArgument",
    "BufferTooSmall",
    "InvalidIndex",
    "Truncated",
    "Cancelled",
    "IoError",
    "HttpError",
    "RangeNotSupported",
    "ObjectChanged",
    "ReservationExceeded",
    "WriterState",
};
static_assert(kind_names.size() == static_cast<std::size_t>(errc::WriterState) + 1);

class ringsafe_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "ringsafe"; }
    std::string message(int v) const override {
        if (v <= 0 || v >= static_cast<int>(kind_names.size())) return "unknown ringsafe error";
        return std::string(kind_names[static_cast<std::size_t>(v)]);
    }
};

}  // namespace

const std::error_category& category() noexcept {
    static const ringsafe_category cat;
    return cat;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

std::string_view error_kind(const std::error_code& ec) noexcept {
    if (ec.category() == category()) {
        int v = ec.value();
        if (v > 0 && v < static_cast<int>(kind_names.size()))
            return kind_names[static_cast<std::size_t>(v)];
        return "Error";
    }
    if (ec.category() == std::system_category() || ec.category() == std::generic_category())
        return "IoError";
    return "Error";
}

void raise(std::error_code ec, const std::string& message) { throw error(ec, message); }

void raise(errc e, const std::string& message) { throw error(e, message); }

void raise_errno(int err, const std::string& what) {
    throw error(std::error_code(err, std::system_category()), what + ": " + std::strerror(err));
}

void raise_errno(int err, const std::string& what, const std::string& path) {
    throw error(std::error_code(err, std::system_category()), what + ": " + std::strerror(err), path);
}

}  // namespace ringsafe

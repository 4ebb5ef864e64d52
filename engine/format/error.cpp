// The ringsafe::errc category and the throwing helpers.
#include "ringsafe/error.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

namespace ringsafe {
namespace {

constexpr std::array<std::string_view, 37> kind_names{
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
    "BadMagic",
    "BadVersion",
    "BadEndian",
    "BadCount",
    "BadString",
    "BadArray",
    "BadKV",
    "DuplicateKey",
    "BadAlignment",
    "BadTensorInfo",
    "DuplicateTensor",
    "BadOffset",
    "DataPastEnd",
};
static_assert(kind_names.size() == static_cast<std::size_t>(errc::DataPastEnd) + 1);

class ringsafe_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "ringsafe"; }
    std::string message(int v) const override {
        if (v <= 0 || v >= static_cast<int>(kind_names.size())) return "unknown ringsafe error";
        return std::string(kind_names[static_cast<std::size_t>(v)]);
    }
};

// Query parameters whose values sign or authorize a request (lower case):
// AWS SigV4 and CloudFront presigned URLs, GCS signed URLs, Azure SAS tokens,
// and a bearer token passed as a query parameter.
constexpr std::array<std::string_view, 10> signing_parameters{
    "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
    "x-goog-credential", "sig", "policy", "key-pair-id", "token"};

// Where a query value ends in running text: the next parameter, the fragment,
// or what a message puts around a URL (space, quotes, brackets, angle brackets).
bool ends_value(char c) { return std::string_view("&#'\" \t\r\n()<>").find(c) != std::string_view::npos; }

bool is_signing_parameter(std::string_view name) {
    return std::any_of(signing_parameters.begin(), signing_parameters.end(), [&](std::string_view s) {
        return s.size() == name.size() && std::equal(s.begin(), s.end(), name.begin(), [](char a, char b) {
                   return a == std::tolower(static_cast<unsigned char>(b));
               });
    });
}

}  // namespace

std::string without_url_secrets(std::string text) {
    std::size_t at = text.find_first_of("?&");
    while (at != std::string::npos) {
        const std::size_t name = at + 1;
        std::size_t eq = name;
        while (eq < text.size() && text[eq] != '=' && !ends_value(text[eq]) && text[eq] != '?') ++eq;
        if (eq < text.size() && text[eq] == '=' && is_signing_parameter(std::string_view(text).substr(name, eq - name))) {
            std::size_t end = eq + 1;
            while (end < text.size() && !ends_value(text[end])) ++end;
            if (std::string_view(text).substr(eq + 1, end - eq - 1) != "...") text.replace(eq + 1, end - eq - 1, "...");
            eq += 4;
        }
        at = text.find_first_of("?&", eq);
    }
    return text;
}

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

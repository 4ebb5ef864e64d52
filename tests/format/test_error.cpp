// Tests for include/ringsafe/error.hpp (and the path a missing file's error carries).
#include <catch2/catch.hpp>

#include <cerrno>

#include "ringsafe/error.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;

TEST_CASE("error kinds carry the reference's names") {
    CHECK(error_kind(errc::HeaderTooSmall) == "HeaderTooSmall");
    CHECK(error_kind(errc::InvalidHeaderDeserialization) == "InvalidHeaderDeserialization");
    CHECK(error_kind(errc::MetadataIncompleteBuffer) == "MetadataIncompleteBuffer");
    CHECK(error_kind(errc::DuplicateTensorName) == "DuplicateTensorName");
    CHECK(error_kind(errc::WriterState) == "WriterState");
    CHECK(error_kind(std::error_code(EIO, std::system_category())) == "IoError");
    CHECK(std::string(category().name()) == "ringsafe");
}

TEST_CASE("ringsafe::error keeps the code and the message") {
    try {
        raise(errc::TensorNotFound, "tensor 'w' not found in model.safetensors");
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == errc::TensorNotFound);
        CHECK(e.kind() == "TensorNotFound");
        CHECK(std::string(e.what()).find("tensor 'w'") != std::string::npos);
    }
    try {
        raise_errno(ENOSPC, "writing out.safetensors at offset 4096");
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == std::error_code(ENOSPC, std::system_category()));
        CHECK(e.kind() == "IoError");
        CHECK(std::string(e.what()).find("offset 4096") != std::string::npos);
    }
}

TEST_CASE("ringsafe::error names the path an operating-system error is about") {
    try {
        raise_errno(ENOENT, "'/no/such/dir/m.safetensors': open", "/no/such/dir/m.safetensors");
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == std::error_code(ENOENT, std::system_category()));
        CHECK(e.path() == "/no/such/dir/m.safetensors");
        CHECK(std::string(e.what()) == "'/no/such/dir/m.safetensors': open: No such file or directory");
    }
    try {
        raise_errno(EIO, "io_uring_submit");
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.path().empty());  // not about one path
    }
    // A local file that is not there: the open's error carries its path.
    const std::string missing = "/proc/self/ringsafe-no-such-file.safetensors";
    try {
        (void)reader::open(missing);
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == std::error_code(ENOENT, std::system_category()));
        CHECK(e.path() == missing);
    }
}

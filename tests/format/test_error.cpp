// Tests for include/ringsafe/error.hpp.
#include <catch2/catch.hpp>

#include <cerrno>

#include "ringsafe/error.hpp"

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

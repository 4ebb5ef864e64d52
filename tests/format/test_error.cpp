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
    CHECK(error_kind(errc::BadMagic) == "BadMagic");  // GGUF kinds, as the GGUF corpus spells them
    CHECK(error_kind(errc::DataPastEnd) == "DataPastEnd");
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

TEST_CASE("no ringsafe::error message shows the values of a URL's signing query parameters") {
    // Presigned URLs (S3, GCS, a CDN's), Azure SAS URLs: the query values that
    // sign or authorize the request are credentials. Every message naming such
    // a URL (a source's name, a Location a server sent, a parse error) shows
    // them as "..."; the rest of the URL, the other parameters included, as given.
    const std::string text =
        "tensor 'w' not found in https://acct.blob.core.windows.net/c/m.safetensors?sv=2025-01-05&sig=SAS%2BSECRET&se=2099 "
        "(opening 'https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIDSECRET%2F2026&X-Amz-Signature=SIGSECRET'); "
        "see http://h/x?Token=TOKSECRET#frag and http://cdn/f?Expires=1&Signature=CDNSECRET&Key-Pair-Id=KPSECRET";
    const std::string m = error(errc::TensorNotFound, text).what();
    for (const char* secret : {"SAS%2BSECRET", "AKIDSECRET", "SIGSECRET", "TOKSECRET", "CDNSECRET", "KPSECRET"}) {
        INFO(secret);
        CHECK(m.find(secret) == std::string::npos);
    }
    CHECK(m.find("m.safetensors?sv=2025-01-05&sig=...&se=2099 ") != std::string::npos);
    CHECK(m.find("/k?X-Amz-Credential=...&X-Amz-Signature=...')") != std::string::npos);
    CHECK(m.find("x?Token=...#frag") != std::string::npos);
    CHECK(m.find("f?Expires=1&Signature=...&Key-Pair-Id=...") != std::string::npos);
    CHECK(std::string(error(errc::HttpError, m).what()) == m);  // shown twice, the same
    // Text that is not a query is left alone.
    const std::string plain = "sig=1 token=2 a?b signature of the header";
    CHECK(std::string(error(errc::InvalidArgument, plain).what()) == plain);
}

// Tests for include/ringsafe/buffer.hpp: host_buffer allocation, alignment,
// ownership, prefaulting and the page report.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "ringsafe/buffer.hpp"
#include "ringsafe/error.hpp"
#include "skip.hpp"

using namespace ringsafe;

namespace {

bool thp_available() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return s.find("[never]") == std::string::npos && !s.empty();
}

}  // namespace

TEST_CASE("host_buffer is aligned, zeroed and writable to its last byte") {
    host_buffer small(10000, {page_kind::small, true});
    REQUIRE(small.size() == 10000);
    CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 4096 == 0);
    CHECK(small.data()[0] == std::byte{0});
    CHECK(small.data()[9999] == std::byte{0});
    small.data()[9999] = std::byte{7};
    CHECK(small.span().size() == 10000);

    host_buffer huge((5u << 20) + 3);
    CHECK(reinterpret_cast<std::uintptr_t>(huge.data()) % (2u << 20) == 0);
    huge.data()[huge.size() - 1] = std::byte{1};

    host_buffer empty(0);
    CHECK(empty.data() == nullptr);
    CHECK(empty.size() == 0);
}

TEST_CASE("host_buffer moves ownership and checks sub-spans") {
    host_buffer a(1u << 20);
    std::byte* p = a.data();
    host_buffer b(std::move(a));
    CHECK(b.data() == p);
    CHECK(a.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    CHECK(a.size() == 0);
    host_buffer c;
    c = std::move(b);
    CHECK(c.data() == p);
    CHECK(c.span(100, 200).data() == p + 100);
    CHECK(c.span(1u << 20, 0).size() == 0);
    try {
        (void)c.span((1u << 20) - 10, 11);
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidArgument);
    }
}

TEST_CASE("prefault makes pages resident; without it they stay untouched") {
    host_buffer lazy(8u << 20, {page_kind::small, false});
    CHECK(lazy.pages().resident == 0);
    CHECK(lazy.pages().label() == "untouched");
    lazy.prefault();
    CHECK(lazy.pages().resident == 8u << 20);
    CHECK(lazy.pages().huge == 0);
    CHECK(lazy.pages().label() == "4KiB");

    host_buffer eager(8u << 20, {page_kind::small, true});
    CHECK(eager.pages().resident == 8u << 20);
}

TEST_CASE("huge-page buffers are backed by transparent huge pages when THP allows") {
    if (!thp_available()) {
        SKIP("transparent huge pages are disabled");
    }
    host_buffer b(16u << 20);  // page_kind::huge, prefaulted
    page_report r = b.pages();
    CHECK(r.size == 16u << 20);
    CHECK(r.resident == 16u << 20);
    // Compaction may fail on a fragmented machine, so some pages may be small, but not all.
    CHECK(r.huge > 0);
    CHECK(r.label() != "4KiB");
    CHECK(describe_pages(b.data(), 4u << 20).size == 4u << 20);
}

TEST_CASE("page_report labels") {
    page_report r;
    r.size = 100;
    CHECK(r.label() == "untouched");
    r.resident = 100;
    CHECK(r.label() == "4KiB");
    r.huge = 95;
    CHECK(r.label() == "THP");
    r.huge = 50;
    CHECK(r.label() == "mixed(50% THP)");
}

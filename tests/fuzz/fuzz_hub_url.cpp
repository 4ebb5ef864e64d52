// libFuzzer target: hf:// URLs (stores/hub/hub_path.hpp) on arbitrary text.
// Whatever is accepted names a repo huggingface_hub would accept, a path and
// revision that stay inside the cache folders they name (no empty, "." or
// ".." segment), a resolve URL that is a valid request target, and a pinned
// spelling that parses back to the same repo, revision and path.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "stores/hub/hub_path.hpp"

namespace rs = ringsafe::stores;

namespace {

bool safe_segments(std::string_view s) {
    std::size_t from = 0;
    while (from <= s.size()) {
        std::size_t slash = s.find('/', from);
        if (slash == std::string_view::npos) slash = s.size();
        const std::string_view seg = s.substr(from, slash - from);
        if (seg.empty() || seg == "." || seg == "..") return false;
        from = slash + 1;
    }
    return s.find('\0') == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    rs::hub_path p;
    try {
        p = rs::parse_hub_url(text);
    } catch (const ringsafe::error& e) {
        FUZZ_CHECK(e.code() == ringsafe::errc::InvalidArgument);
        return 0;
    }
    FUZZ_CHECK(p.type == "model" || p.type == "dataset" || p.type == "space" || p.type == "kernel");
    FUZZ_CHECK(p.repo.find('/') != std::string::npos && p.repo.find('/') == p.repo.rfind('/'));
    FUZZ_CHECK(p.repo.find("..") == std::string::npos && p.repo.find("--") == std::string::npos);
    FUZZ_CHECK(p.path.empty() || safe_segments(p.path));
    FUZZ_CHECK(p.revision.empty() || safe_segments(p.revision));
    FUZZ_CHECK(rs::hub_repo_folder(p).find('/') == std::string::npos);
    // The resolve URL goes on the wire: printable, parsed back whole.
    const std::string resolve = rs::hub_resolve_url("https://hub.example", p, p.revision_or_main());
    const auto u = ringsafe::http::parse_url(resolve);
    FUZZ_CHECK(u.host == "hub.example" && u.str() == resolve);
    // A pinned (or revision-keeping) spelling parses back to the same file.
    for (const std::string& rev : {std::string("0123456789abcdef0123456789abcdef01234567"), p.revision}) {
        if (rev.empty()) continue;
        const rs::hub_path back = rs::parse_hub_url(rs::hub_url(p, rev));
        FUZZ_CHECK(back.type == p.type && back.repo == p.repo && back.revision == rev && back.path == p.path);
    }
    return 0;
}

// hf:// URLs (hub_path.hpp), after huggingface_hub's utils/_hf_uris.py,
// _validators.validate_repo_id and file_download.hf_hub_url.
#include "stores/hub/hub_path.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "http/ascii_case.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::stores {
namespace {

constexpr std::string_view hf_scheme = "hf://";

// URL prefix (plural) and the type it names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> hub_types{{
    {"models", "model"}, {"datasets", "dataset"}, {"spaces", "space"}, {"kernels", "kernel"}}};

[[noreturn]] void bad_hub_url(std::string_view url, const std::string& why) {
    raise(errc::InvalidArgument, "invalid hf:// URL '" + std::string(url) + "': " + why +
                                     " (expected hf://[datasets/|spaces/]ORG/NAME[@REVISION][/PATH])");
}

bool hub_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One part of a repo id as validate_repo_id accepts it: 1..96 of [A-Za-z0-9_.-],
// starting and ending with [A-Za-z0-9_].
bool valid_repo_id_part(std::string_view s) {
    if (s.empty() || s.size() > 96 || !hub_word_char(s.front()) || !hub_word_char(s.back())) return false;
    for (char c : s)
        if (!hub_word_char(c) && c != '-' && c != '.') return false;
    return true;
}

void check_hub_repo_id(std::string_view url, std::string_view id) {
    const auto slash = id.find('/');
    if (slash == std::string_view::npos || id.find('/', slash + 1) != std::string_view::npos)
        bad_hub_url(url, "the repo id must be ORG/NAME, got '" + std::string(id) + "'");
    if (!valid_repo_id_part(id.substr(0, slash)) || !valid_repo_id_part(id.substr(slash + 1)))
        bad_hub_url(url, "the repo id '" + std::string(id) +
                     "' must use letters, digits, '-', '_' and '.' (at most 96 in each part, not starting or "
                     "ending with '-' or '.')");
    if (id.find("--") != std::string_view::npos || id.find("..") != std::string_view::npos)
        bad_hub_url(url, "the repo id '" + std::string(id) + "' holds '--' or '..'");
    if (id.ends_with(".git")) bad_hub_url(url, "the repo id '" + std::string(id) + "' ends with '.git'");
}

// The length of a special ref (refs/pr/N, refs/convert/NAME) `s` starts with, else 0.
std::size_t hub_special_ref_length(std::string_view s) {
    auto run = [&](std::size_t from, auto pred) {
        std::size_t i = from;
        while (i < s.size() && pred(s[i])) ++i;
        return i;
    };
    if (s.starts_with("refs/pr/")) {
        const std::size_t end = run(8, [](char c) { return c >= '0' && c <= '9'; });
        return end > 8 ? end : 0;
    }
    if (s.starts_with("refs/convert/")) {
        const std::size_t end = run(13, [](char c) { return hub_word_char(c) || c == '.' || c == '-'; });
        return end > 13 ? end : 0;
    }
    return 0;
}

// A path in the repo, or a revision (a file under refs/ in the cache): no
// empty, "." or ".." segment (nothing outside the folder it names), no NUL.
void check_hub_segments(std::string_view url, std::string_view what, std::string_view path) {
    std::size_t from = 0;
    while (from <= path.size()) {
        std::size_t slash = path.find('/', from);
        if (slash == std::string_view::npos) slash = path.size();
        const std::string_view seg = path.substr(from, slash - from);
        if (seg.empty()) bad_hub_url(url, "the " + std::string(what) + " '" + std::string(path) + "' has an empty segment");
        if (seg == "." || seg == "..")
            bad_hub_url(url, "the " + std::string(what) + " '" + std::string(path) + "' has a '" + std::string(seg) + "' segment");
        from = slash + 1;
    }
    if (path.find('\0') != std::string_view::npos) bad_hub_url(url, "the " + std::string(what) + " holds a NUL byte");
}

std::string_view hub_type_prefix(const std::string& type) {
    for (auto& [prefix, name] : hub_types)
        if (name == type) return prefix;
    return "models";
}

}  // namespace

const std::string& hub_path::revision_or_main() const {
    static const std::string main = "main";
    return revision.empty() ? main : revision;
}

hub_path parse_hub_url(std::string_view url) {
    if (!http::starts_with_icase(url, hf_scheme))
        bad_hub_url(url, "not an hf:// URL");
    std::string_view body = url.substr(hf_scheme.size());
    // location.strip("/")
    while (!body.empty() && body.front() == '/') body.remove_prefix(1);
    while (!body.empty() && body.back() == '/') body.remove_suffix(1);
    if (body.empty()) bad_hub_url(url, "no repository");

    hub_path p;
    if (const auto slash = body.find('/'); slash != std::string_view::npos) {
        const std::string_view first = body.substr(0, slash);
        bool typed = false;
        for (auto& [prefix, name] : hub_types)
            if (first == prefix) {
                p.type = std::string(name);
                body.remove_prefix(slash + 1);
                typed = true;
            }
        if (!typed) {
            if (first == "buckets") bad_hub_url(url, "buckets are not supported, only model, dataset, space and kernel repos");
            for (auto& [prefix, name] : hub_types)
                if (first == name) bad_hub_url(url, "the type prefix must be plural ('" + std::string(prefix) + "/')");
        }
    }
    while (!body.empty() && body.front() == '/') body.remove_prefix(1);

    // '@' starts the revision only right after ORG/NAME (at most one '/' before it).
    const auto at = body.find('@');
    std::size_t slashes_before = 0;
    if (at != std::string_view::npos)
        for (std::size_t i = 0; i < at; ++i) slashes_before += body[i] == '/';
    if (at == std::string_view::npos || slashes_before > 1) {
        const auto s1 = body.find('/');
        if (s1 == std::string_view::npos) bad_hub_url(url, "the repo id must be ORG/NAME, got '" + std::string(body) + "'");
        const auto s2 = body.find('/', s1 + 1);
        p.repo = std::string(body.substr(0, s2));
        if (s2 != std::string_view::npos) p.path = std::string(body.substr(s2 + 1));
    } else {
        p.repo = std::string(body.substr(0, at));
        const std::string_view rest = body.substr(at + 1);
        std::string_view rev = rest;
        if (const std::size_t special = hub_special_ref_length(rest)) {
            rev = rest.substr(0, special);
            std::string_view after = rest.substr(special);
            if (after.starts_with('/')) after.remove_prefix(1);
            p.path = std::string(after);
        } else if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
            rev = rest.substr(0, slash);
            p.path = std::string(rest.substr(slash + 1));
        }
        p.revision = http::percent_decode(rev);
        if (p.revision.empty()) bad_hub_url(url, "empty revision after '@'");
        check_hub_segments(url, "revision", p.revision);
    }
    check_hub_repo_id(url, p.repo);
    if (!p.path.empty()) check_hub_segments(url, "path", p.path);
    return p;
}

std::string hub_url(const hub_path& p, const std::string& revision) {
    std::string out(hf_scheme);
    // A model's URL goes without "models/" unless its ORG would read as a type prefix.
    const std::string_view org = std::string_view(p.repo).substr(0, p.repo.find('/'));
    bool org_is_type = org == "buckets";
    for (auto& [prefix, name] : hub_types) org_is_type = org_is_type || org == prefix || org == name;
    if (p.type != "model" || org_is_type) out += std::string(hub_type_prefix(p.type)) + "/";
    out += p.repo;
    if (!revision.empty()) {
        // What parse_hub_url decodes is encoded: '%' always, '/' unless the revision is a special ref.
        const bool keep_slash = hub_special_ref_length(revision) == revision.size();
        out += "@";
        for (char c : revision) out += c == '%' ? std::string("%25") : c == '/' && !keep_slash ? std::string("%2F") : std::string(1, c);
    }
    if (!p.path.empty()) out += "/" + p.path;
    return out;
}

std::string hub_resolve_url(const std::string& endpoint, const hub_path& p, const std::string& revision) {
    std::string out = endpoint;
    while (!out.empty() && out.back() == '/') out.pop_back();
    out += "/";
    if (p.type != "model") out += std::string(hub_type_prefix(p.type)) + "/";
    out += p.repo + "/resolve/" + http::uri_encode(revision, false) + "/" + http::uri_encode(p.path, true);
    return out;
}

std::string hub_repo_folder(const hub_path& p) {
    std::string out = std::string(hub_type_prefix(p.type)) + "--";
    for (char c : p.repo) out += c == '/' ? std::string("--") : std::string(1, c);
    return out;
}

bool is_commit_hash(std::string_view s) noexcept {
    if (s.size() != 40) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

}  // namespace ringsafe::stores

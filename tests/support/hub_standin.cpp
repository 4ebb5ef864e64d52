// A stand-in for the Hugging Face Hub's file endpoints, for the tests and
// benchmarks (C++ and pytest alike), speaking what huggingface_hub and
// ringsafe use of the real protocol:
//
//   HEAD|GET /[datasets/|spaces/|kernels/]ORG/NAME/resolve/REVISION/PATH
//     LFS files (*.safetensors, *.bin, *.pt, or over 10 MiB): 302 to the CDN
//     with X-Repo-Commit, X-Linked-Etag (sha256), X-Linked-Size and a presigned
//     Location; other files: the bytes (200, or 206 for a Range) with
//     X-Repo-Commit and ETag (the git blob sha1). Errors as the Hub sends them:
//     401/403/404 with X-Error-Code RepoNotFound, GatedRepo, RevisionNotFound,
//     EntryNotFound.
//   GET /api/{models,datasets,spaces}/ORG/NAME[/revision/REVISION]
//     {"id", "sha", "siblings": [{"rfilename"}]} (repo_info, for snapshot_download).
//   GET /api/{models,datasets,spaces}/ORG/NAME/tree/REVISION[/PATH]
//     [{"type", "oid", "size", "path", "lfs"}] (list_repo_tree, recursive, one page).
//   GET /_standin/stats  {"requests": N, "log": ["HEAD /org/name/resolve/main/x auth", ...]}
//     (every request but this one; "auth" when it carried Authorization).
//
// Usage: hub_standin ROOT CDN_BASE [PORT]; prints "PORT <n>" once listening on
// 127.0.0.1. The repos live under ROOT as files the tests write:
//   ROOT/models/ORG/NAME/refs/BRANCH            the commit (40 hex) BRANCH is at (also refs/pr/N)
//   ROOT/models/ORG/NAME/commits/COMMIT/PATH    the files of each commit
//   ROOT/models/ORG/NAME/gated                  gated: this token is needed (401 without one, 403 with another)
//   ROOT/models/ORG/NAME/private                private: this token is needed (401 RepoNotFound otherwise)
//   ROOT/models/ORG/NAME/move                   "N BRANCH COMMIT": after N more resolves of BRANCH, BRANCH
//                                               moves to COMMIT (the file is then removed)
//   ROOT/models/ORG/NAME/ttl                    seconds a CDN URL stays valid (default 3600)
//   ROOT/models/ORG/NAME/gone                   an expired CDN URL answers 410 (default 403)
//   ROOT/models/ORG/NAME/cdn                    the Location instead of the CDN's: {file} is replaced by the
//                                               file's absolute path, {rel} by its path under ROOT, {query}
//                                               by the presigned query the CDN checks
//   ROOT/models/ORG/NAME/size_delta             added to X-Linked-Size (a lying Hub)
//   ROOT/models/ORG/NAME/delay_ms               each resolve answers after this many milliseconds
//   ROOT/models/ORG/NAME/any_revision           the commit every revision without a ref resolves to
//   ROOT/models/ORG/NAME/empty                  an LFS file's resolve answers 200 with no body, its
//                                               X-Repo-Commit and X-Linked-Etag but no X-Linked-Size
// (datasets/, spaces/, kernels/ likewise). The CDN is an nginx serving ROOT
// that checks the signature and expiry with secure_link (cdn_nginx_conf()).
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "hub_standin_secret.hpp"
#include "standin_http.hpp"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using asio::ip::tcp;
using namespace ringsafe::test;  // standin_http.hpp

namespace {

fs::path g_root;
std::string g_cdn;
std::mutex g_mutex;  // the log, the move counters, the hash cache
std::vector<std::string> g_log;
std::map<std::string, std::pair<std::string, std::string>> g_hashes;  // path -> (stamp, hex digest)

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    std::string t = s.str();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
}

std::string hex(const unsigned char* d, unsigned n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) out += std::string{digits[d[i] >> 4], digits[d[i] & 15]};
    return out;
}

// The digest of a file (sha256), or of "blob <size>\0" + the file (sha1, git's blob id).
std::string file_digest(const fs::path& p, bool git) {
    const std::string key = p.string() + (git ? "#git" : "#sha256");
    std::error_code ec;
    const std::string stamp = std::to_string(fs::file_size(p, ec)) + ":" +
                              std::to_string(fs::last_write_time(p, ec).time_since_epoch().count());
    {
        std::lock_guard lock(g_mutex);
        auto it = g_hashes.find(key);
        if (it != g_hashes.end() && it->second.first == stamp) return it->second.second;
    }
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, git ? EVP_sha1() : EVP_sha256(), nullptr);
    if (git) {
        const std::string head = "blob " + std::to_string(fs::file_size(p, ec));
        EVP_DigestUpdate(ctx, head.data(), head.size() + 1);  // with its NUL
    }
    std::ifstream in(p, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx, md, &n);
    EVP_MD_CTX_free(ctx);
    const std::string d = hex(md, n);
    std::lock_guard lock(g_mutex);
    g_hashes[key] = {stamp, d};
    return d;
}

// nginx secure_link_md5: base64url (no padding) of md5(text).
std::string secure_link_md5(const std::string& text) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_Digest(text.data(), text.size(), md, &n, EVP_md5(), nullptr);
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    unsigned i = 0;
    for (; i + 2 < n; i += 3) {
        const unsigned v = (md[i] << 16) | (md[i + 1] << 8) | md[i + 2];
        out += {b64[(v >> 18) & 63], b64[(v >> 12) & 63], b64[(v >> 6) & 63], b64[v & 63]};
    }
    if (n - i == 1) {
        const unsigned v = md[i] << 16;
        out += {b64[(v >> 18) & 63], b64[(v >> 12) & 63]};
    } else if (n - i == 2) {
        const unsigned v = (md[i] << 16) | (md[i + 1] << 8);
        out += {b64[(v >> 18) & 63], b64[(v >> 12) & 63], b64[(v >> 6) & 63]};
    }
    return out;
}

int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string decode(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out += static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::size_t from = 0;
    for (;;) {
        const auto at = s.find(sep, from);
        out.push_back(s.substr(from, at - from));
        if (at == std::string::npos) return out;
        from = at + 1;
    }
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        out += c;
    }
    return out;
}

struct response {
    unsigned status = 200;
    std::string reason = "OK";
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;               // small bodies
    fs::path file;                  // or a file's bytes [first, first + length)
    std::uint64_t first = 0, length = 0;
};

void send(tcp::socket& s, const response& r, bool head_only) {
    std::string h = "HTTP/1.1 " + std::to_string(r.status) + " " + r.reason + "\r\n";
    const std::uint64_t len = r.file.empty() ? r.body.size() : r.length;
    for (auto& [k, v] : r.fields) h += k + ": " + v + "\r\n";
    h += "Content-Length: " + std::to_string(len) + "\r\n\r\n";
    asio::write(s, asio::buffer(h));
    if (head_only) return;
    if (r.file.empty()) {
        asio::write(s, asio::buffer(r.body));
        return;
    }
    std::ifstream in(r.file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(r.first));
    std::vector<char> buf(1 << 20);
    for (std::uint64_t left = r.length; left > 0;) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
        in.read(buf.data(), static_cast<std::streamsize>(n));
        asio::write(s, asio::buffer(buf.data(), n));
        left -= n;
    }
}

response error_response(unsigned status, const std::string& reason, const std::string& code, const std::string& message,
                        const std::string& commit = {}) {
    response r;
    r.status = status;
    r.reason = reason;
    r.fields.push_back({"Content-Type", "application/json"});
    if (!code.empty()) r.fields.push_back({"X-Error-Code", code});
    r.fields.push_back({"X-Error-Message", message});
    if (!commit.empty()) r.fields.push_back({"X-Repo-Commit", commit});
    r.body = "{\"error\":\"" + json_escape(message) + "\"}";
    return r;
}

bool is_lfs(const fs::path& p, std::uint64_t size) {
    const std::string e = p.extension().string();
    return e == ".safetensors" || e == ".bin" || e == ".pt" || size > (10u << 20);
}

// The repo folder, its type prefix (URL) and the rest of the target after ORG/NAME.
struct repo_ref {
    fs::path dir;
    std::string type_dir;  // "models", ...
    std::string id;        // ORG/NAME
};

std::optional<repo_ref> repo_of(const std::vector<std::string>& parts, std::size_t& i) {
    repo_ref r;
    r.type_dir = "models";
    if (i < parts.size() && (parts[i] == "datasets" || parts[i] == "spaces" || parts[i] == "kernels")) r.type_dir = parts[i++];
    if (i + 1 >= parts.size()) return std::nullopt;
    r.id = parts[i] + "/" + parts[i + 1];
    r.dir = g_root / r.type_dir / parts[i] / parts[i + 1];
    i += 2;
    return r;
}

// 401/403 for a gated or private repo the request has no access to; nullopt when it has.
std::optional<response> check_access(const repo_ref& r, const std::string& head) {
    const std::string auth = header_value(head, "authorization");
    for (const char* kind : {"gated", "private"}) {
        const fs::path f = r.dir / kind;
        if (!fs::exists(f)) continue;
        const std::string want = "Bearer " + read_text(f);
        if (auth == want) return std::nullopt;
        const bool gated = std::string(kind) == "gated";
        if (auth.empty())
            return error_response(401, "Unauthorized", gated ? "GatedRepo" : "RepoNotFound",
                                  gated ? "Access to model " + r.id + " is restricted. You must have access to it and be authenticated to access it. Please log in."
                                        : "Repository Not Found for url.");
        return error_response(403, "Forbidden", gated ? "GatedRepo" : "RepoNotFound",
                              gated ? "Access to model " + r.id + " is restricted and you are not in the authorized list."
                                    : "Repository Not Found for url.");
    }
    return std::nullopt;
}

// The commit `rev` names in the repo (applying a pending move); empty when none.
std::string resolve_revision(const repo_ref& r, const std::string& rev, bool counts) {
    if (rev.size() == 40 && fs::is_directory(r.dir / "commits" / rev)) return rev;
    const fs::path ref = r.dir / "refs" / rev;
    std::error_code ec;
    if (rev.find("..") == std::string::npos && !fs::is_regular_file(ref, ec) && fs::exists(r.dir / "any_revision"))
        return read_text(r.dir / "any_revision");  // names too long for a file here (a 300-character branch)
    if (rev.find("..") != std::string::npos || !fs::is_regular_file(ref, ec)) return {};
    std::lock_guard lock(g_mutex);
    std::string commit = read_text(ref);
    const fs::path move = r.dir / "move";
    if (counts && fs::exists(move)) {
        std::istringstream in(read_text(move));
        long n = 0;
        std::string branch, to;
        in >> n >> branch >> to;
        if (branch == rev) {
            if (n <= 1) {
                std::ofstream(ref, std::ios::trunc) << to;
                fs::remove(move);
            } else {
                std::ofstream(move, std::ios::trunc) << (n - 1) << " " << branch << " " << to;
            }
        }
    }
    return commit;
}

response resolve(const repo_ref& r, const std::string& rev_raw, const std::string& path_raw, const std::string& head,
                 const std::string& method) {
    if (!fs::is_directory(r.dir))
        return header_value(head, "authorization").empty()
                   ? error_response(401, "Unauthorized", "RepoNotFound", "Repository Not Found for url.")
                   : error_response(404, "Not Found", "RepoNotFound", "Repository Not Found for url.");
    if (auto denied = check_access(r, head)) return *denied;
    if (fs::exists(r.dir / "delay_ms"))  // the Hub's own latency, for the benchmarks
        std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(read_text(r.dir / "delay_ms"))));
    const std::string rev = decode(rev_raw), path = decode(path_raw);
    const std::string commit = resolve_revision(r, rev, method == "GET" || method == "HEAD");
    if (commit.empty()) return error_response(404, "Not Found", "RevisionNotFound", "Invalid rev id: " + rev);
    const fs::path file = r.dir / "commits" / commit / path;
    if (path.empty() || path.find("..") != std::string::npos || !fs::is_regular_file(file))
        return error_response(404, "Not Found", "EntryNotFound", "Entry not found", commit);
    const std::uint64_t size = fs::file_size(file);
    response out;
    out.fields.push_back({"X-Repo-Commit", commit});
    out.fields.push_back({"Access-Control-Expose-Headers", "X-Repo-Commit,X-Linked-Etag,X-Linked-Size"});
    if (is_lfs(file, size)) {
        std::int64_t delta = 0;
        if (fs::exists(r.dir / "size_delta")) delta = std::stoll(read_text(r.dir / "size_delta"));
        long ttl = 3600;
        if (fs::exists(r.dir / "ttl")) ttl = std::stol(read_text(r.dir / "ttl"));
        const std::string rel = "/" + r.type_dir + "/" + r.id + "/commits/" + commit + "/" + path;
        const std::string expires = std::to_string(std::time(nullptr) + ttl);
        // A credential-like parameter with escapes that a client must send back as they are.
        const std::string cred = "STANDIN%2F20260101%2Fus-east-1%2Fs3%2Faws4_request";
        const std::string query = "Expires=" + expires +
                                  "&Signature=" + secure_link_md5(expires + rel + cred + " " + ringsafe::test::hub_cdn_secret) +
                                  "&cred=" + cred + (fs::exists(r.dir / "gone") ? "&gone=1" : "") + "&Key-Pair-Id=K2STANDIN";
        if (fs::exists(r.dir / "empty")) {  // a lying Hub: the bytes of nothing under the file's name
            out.fields.push_back({"X-Linked-Etag", "\"" + file_digest(file, false) + "\""});
            out.fields.push_back({"Content-Type", "application/octet-stream"});
            return out;
        }
        std::string location = g_cdn + rel + "?" + query;
        if (fs::exists(r.dir / "cdn")) {
            location = read_text(r.dir / "cdn");
            for (auto [key, value] : {std::pair<std::string, std::string>{"{file}", fs::absolute(file).string()},
                                      std::pair<std::string, std::string>{"{rel}", rel},
                                      std::pair<std::string, std::string>{"{query}", query}})
                for (auto at = location.find(key); at != std::string::npos; at = location.find(key))
                    location.replace(at, key.size(), value);
        }
        out.status = 302;
        out.reason = "Found";
        out.fields.push_back({"Location", location});
        out.fields.push_back({"X-Linked-Etag", "\"" + file_digest(file, false) + "\""});
        out.fields.push_back({"X-Linked-Size", std::to_string(static_cast<std::int64_t>(size) + delta)});
        out.fields.push_back({"ETag", "W/\"redirect-" + commit.substr(0, 8) + "\""});
        out.fields.push_back({"Content-Type", "text/plain; charset=utf-8"});
        out.body = "Found. Redirecting to " + location;
        return out;
    }
    out.fields.push_back({"ETag", "\"" + file_digest(file, true) + "\""});
    out.fields.push_back({"Accept-Ranges", "bytes"});
    out.fields.push_back({"Content-Type", "application/octet-stream"});
    out.file = file;
    out.length = size;
    const std::string range = header_value(head, "range");
    if (range.rfind("bytes=", 0) == 0 && size > 0) {
        const auto dash = range.find('-');
        std::uint64_t first = std::stoull(range.substr(6, dash - 6)), last = size - 1;
        if (dash + 1 < range.size()) last = std::min<std::uint64_t>(std::stoull(range.substr(dash + 1)), size - 1);
        if (first >= size) {
            response bad = error_response(416, "Range Not Satisfiable", "", "Range Not Satisfiable", commit);
            bad.fields.push_back({"Content-Range", "bytes */" + std::to_string(size)});
            return bad;
        }
        out.status = 206;
        out.reason = "Partial Content";
        out.first = first;
        out.length = last - first + 1;
        out.fields.push_back({"Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                                   std::to_string(size)});
    }
    return out;
}

response listing(const repo_ref& r, const std::string& rev, const std::string& head) {
    if (!fs::is_directory(r.dir)) return error_response(404, "Not Found", "RepoNotFound", "Repository Not Found for url.");
    if (auto denied = check_access(r, head)) return *denied;
    const std::string commit = resolve_revision(r, rev, false);
    if (commit.empty()) return error_response(404, "Not Found", "RevisionNotFound", "Invalid rev id: " + rev);
    const fs::path base = r.dir / "commits" / commit;
    std::string siblings;
    for (auto& e : fs::recursive_directory_iterator(base)) {
        if (!e.is_regular_file()) continue;
        if (!siblings.empty()) siblings += ",";
        siblings += "{\"rfilename\":\"" + json_escape(fs::relative(e.path(), base).string()) + "\"}";
    }
    response out;
    out.fields.push_back({"Content-Type", "application/json"});
    out.body = "{\"id\":\"" + r.id + "\",\"modelId\":\"" + r.id + "\",\"sha\":\"" + commit + "\",\"private\":false,\"siblings\":[" +
               siblings + "]}";
    return out;
}

// GET /api/models/ORG/NAME/tree/REVISION[/PATH]: every file under PATH (recursive), as list_repo_tree reads it.
response tree(const repo_ref& r, const std::string& rev, const std::string& under, const std::string& head) {
    if (!fs::is_directory(r.dir)) return error_response(404, "Not Found", "RepoNotFound", "Repository Not Found for url.");
    if (auto denied = check_access(r, head)) return *denied;
    const std::string commit = resolve_revision(r, rev, false);
    if (commit.empty()) return error_response(404, "Not Found", "RevisionNotFound", "Invalid rev id: " + rev);
    const fs::path base = r.dir / "commits" / commit;
    std::string entries;
    for (auto& e : fs::recursive_directory_iterator(base / under)) {
        const std::string path = fs::relative(e.path(), base).string();
        if (!entries.empty()) entries += ",";
        if (e.is_directory()) {
            entries += "{\"type\":\"directory\",\"oid\":\"" + std::string(40, '0') + "\",\"size\":0,\"path\":\"" +
                       json_escape(path) + "\"}";
            continue;
        }
        const std::uint64_t size = fs::file_size(e.path());
        entries += "{\"type\":\"file\",\"oid\":\"" + file_digest(e.path(), true) + "\",\"size\":" + std::to_string(size) +
                   ",\"path\":\"" + json_escape(path) + "\"";
        if (is_lfs(e.path(), size))
            entries += ",\"lfs\":{\"oid\":\"" + file_digest(e.path(), false) + "\",\"size\":" + std::to_string(size) +
                       ",\"pointerSize\":134}";
        entries += "}";
    }
    response out;
    out.fields.push_back({"Content-Type", "application/json"});
    out.body = "[" + entries + "]";
    return out;
}

response route(const std::string& method, const std::string& target, const std::string& head) {
    const std::string path = target.substr(0, target.find('?'));
    if (path == "/_standin/stats") {
        std::lock_guard lock(g_mutex);
        std::string log;
        for (auto& l : g_log) log += (log.empty() ? "\"" : ",\"") + json_escape(l) + "\"";
        response r;
        r.fields.push_back({"Content-Type", "application/json"});
        r.body = "{\"requests\":" + std::to_string(g_log.size()) + ",\"log\":[" + log + "]}";
        return r;
    }
    {
        std::lock_guard lock(g_mutex);
        g_log.push_back(method + " " + target + (header_value(head, "authorization").empty() ? "" : " auth"));
    }
    const std::vector<std::string> parts = split(path.substr(1), '/');
    std::size_t i = 0;
    if (!parts.empty() && parts[0] == "api" && parts.size() >= 4) {
        i = 1;
        std::vector<std::string> rest(parts.begin() + 1, parts.end());
        if (rest[0] == "models") rest.erase(rest.begin());
        std::size_t j = 0;
        auto r = repo_of(rest, j);
        if (!r) return error_response(404, "Not Found", "", "Not Found");
        std::string rev = "main";
        if (j + 1 < rest.size() && rest[j] == "tree") {
            std::string under;
            for (std::size_t k = j + 2; k < rest.size(); ++k) under += (under.empty() ? "" : "/") + decode(rest[k]);
            return tree(*r, decode(rest[j + 1]), under, head);
        }
        if (j + 1 < rest.size() && rest[j] == "revision") rev = decode(rest[j + 1]);
        return listing(*r, rev, head);
    }
    auto r = repo_of(parts, i);
    if (!r || i + 2 > parts.size() || parts[i] != "resolve") return error_response(404, "Not Found", "", "Not Found");
    std::string rest;
    for (std::size_t k = i + 2; k < parts.size(); ++k) rest += (rest.empty() ? "" : "/") + parts[k];
    return resolve(*r, parts[i + 1], rest, head, method);
}

void session(tcp::socket s) {
    try {
        asio::streambuf buf;
        for (;;) {
            const std::string head = read_head(s, buf);
            const auto line_end = head.find("\r\n");
            const std::string line = head.substr(0, line_end);
            const auto sp1 = line.find(' '), sp2 = line.rfind(' ');
            const std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
            send(s, route(method, target, head), method == "HEAD");
            std::string conn = header_value(head, "connection");
            std::transform(conn.begin(), conn.end(), conn.begin(), ::tolower);
            if (conn == "close") break;
        }
    } catch (const std::exception&) {
    }
    boost::system::error_code ec;
    s.close(ec);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: hub_standin ROOT CDN_BASE [PORT]\n");
        return 2;
    }
    g_root = fs::absolute(argv[1]);
    g_cdn = argv[2];
    while (!g_cdn.empty() && g_cdn.back() == '/') g_cdn.pop_back();
    serve_loopback(argc > 3 ? static_cast<unsigned short>(std::atoi(argv[3])) : 0, session);
}

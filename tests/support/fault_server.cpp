// A small HTTP/1.1 server (Boost.Asio, one thread per connection) that serves
// synthetic objects with faults nginx cannot produce. Prints "PORT <n>" once
// listening on 127.0.0.1 (port 0 = any free port, or argv[1]).
//
// GET /<anything>?size=N[&fault=F][&after=B][&skip=K][&fail=M][&id=I]
//                 [&retry_after=S][&delay_ms=D][&rate=BYTES_PER_S]
// serves N bytes of fault_byte(i) with Range support and ETag "\"v1\"";
// with &file=PATH (absolute) it serves that file's bytes instead (N = its size).
// Requests number k = 1, 2, ... per id; fault F applies to requests
// skip < k <= skip + fail (fail defaults to unlimited):
//   close     send B body bytes, then close            reset   B bytes, then RST
//   stall     B bytes, then send nothing more           503/429 that status (+ Retry-After: S)
//   badrange  Content-Range shifted by one byte         badtotal  wrong total in Content-Range
//   longer    Content-Length and body one byte longer   etag    ETag "\"v<k>\"" (changes every request)
//   ignore    200 with the whole object (Range ignored) change  ETag "\"v2\"" and honours If-Match (412)
//   badheader a response header with a line that is not a field, then close
//   slow      the body at slow_rate bytes/s (default 100): a drip that never stalls
//   swap      the bytes of &other=PATH (a file of the same size) under the same ETag "\"v1\""
// delay_ms delays every response header; rate limits each response's send rate.
// GET /stats?id=I answers "connections <all> requests <of I> bytes <body bytes sent for I>".
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "fault_pattern.hpp"
#include "standin_http.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace ringsafe::test;  // standin_http.hpp

namespace {

std::atomic<unsigned> g_connections{0}, g_requests{0};
std::mutex g_mutex;
std::map<std::string, unsigned> g_counts;       // requests per id
std::map<std::string, std::uint64_t> g_bytes;   // body bytes sent per id

std::map<std::string, std::string> parse_query(const std::string& target) {
    std::map<std::string, std::string> q;
    auto pos = target.find('?');
    if (pos == std::string::npos) return q;
    std::string rest = target.substr(pos + 1);
    std::size_t i = 0;
    while (i <= rest.size()) {
        auto amp = rest.find('&', i);
        if (amp == std::string::npos) amp = rest.size();
        auto kv = rest.substr(i, amp - i);
        auto eq = kv.find('=');
        if (eq != std::string::npos) q[kv.substr(0, eq)] = kv.substr(eq + 1);
        i = amp + 1;
    }
    return q;
}

void write_all(tcp::socket& s, const std::string& data) { asio::write(s, asio::buffer(data)); }

// Sends body bytes [from, to) of the pattern (or of `file`), at most `rate` bytes/s when rate > 0.
void send_body(tcp::socket& s, std::uint64_t from, std::uint64_t to, std::uint64_t rate, const std::string& id,
               const std::string& file) {
    std::ifstream in;
    if (!file.empty()) in.open(file, std::ios::binary);
    std::vector<std::byte> buf(256 << 10);
    const std::uint64_t slice = rate ? std::max<std::uint64_t>(rate / 100, 1) : buf.size();
    auto start = std::chrono::steady_clock::now();
    std::uint64_t sent = 0;
    while (from < to) {
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>({to - from, buf.size(), slice}));
        const auto& table = ringsafe::test::fault_table();
        if (in.is_open()) {
            in.seekg(static_cast<std::streamoff>(from));
            in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
        }
        for (std::size_t i = 0; i < n && !in.is_open();) {  // per 64 KiB block: table xor one key
            const std::uint64_t at = from + i;
            const std::size_t run = std::min<std::size_t>(n - i, 65536 - (at & 0xFFFF));
            const std::uint8_t key = ringsafe::test::fault_block_key(at);
            const std::uint8_t* t = table.data() + (at & 0xFFFF);
            auto* out = reinterpret_cast<std::uint8_t*>(buf.data() + i);
            for (std::size_t k = 0; k < run; ++k) out[k] = t[k] ^ key;
            i += run;
        }
        asio::write(s, asio::buffer(buf.data(), n));
        from += n;
        sent += n;
        {
            std::lock_guard lock(g_mutex);
            g_bytes[id] += n;
        }
        if (rate) std::this_thread::sleep_until(start + std::chrono::microseconds(sent * 1'000'000 / rate));
    }
}

// Waits until the peer closes: a stalled response.
void wait_for_close(tcp::socket& s) {
    char c[512];
    boost::system::error_code ec;
    while (!ec) s.read_some(asio::buffer(c), ec);
}

// Serves one request; returns false when the connection must end.
bool serve(tcp::socket& s, const std::string& head) {
    ++g_requests;
    auto line_end = head.find("\r\n");
    std::string line = head.substr(0, line_end);
    auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (target.rfind("/stats", 0) == 0) {
        auto id = parse_query(target)["id"];
        std::lock_guard lock(g_mutex);
        std::string body = "connections " + std::to_string(g_connections.load()) + " requests " +
                           std::to_string(g_counts[id]) + " bytes " + std::to_string(g_bytes[id]);
        write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
        return true;
    }
    auto q = parse_query(target);
    auto num = [&](const char* k, std::uint64_t def) { return q.count(k) ? std::stoull(q[k]) : def; };
    const std::string file = q["file"];
    std::ifstream probe(file, std::ios::binary | std::ios::ate);
    if (!file.empty() && !probe) {
        write_all(s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        return true;
    }
    const std::uint64_t size = file.empty() ? num("size", 1 << 20) : static_cast<std::uint64_t>(probe.tellg());
    const std::uint64_t after = num("after", 0), skip = num("skip", 0);
    const std::uint64_t fail = num("fail", ~0ull), rate = num("rate", 0), delay = num("delay_ms", 0);
    unsigned k;
    {
        std::lock_guard lock(g_mutex);
        k = ++g_counts[q["id"]];
    }
    std::string fault = (k > skip && k - skip <= fail) ? q["fault"] : "";
    if (delay) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    std::string etag = fault == "etag" ? "\"v" + std::to_string(k) + "\"" : fault == "change" ? "\"v2\"" : "\"v1\"";

    if (fault == "503" || fault == "429") {
        std::string ra = q.count("retry_after") ? "Retry-After: " + q["retry_after"] + "\r\n" : "";
        write_all(s, "HTTP/1.1 " + fault + (fault == "503" ? " Service Unavailable" : " Too Many Requests") +
                         "\r\n" + ra + "Content-Length: 0\r\n\r\n");
        return true;
    }
    if (fault == "badheader") {
        write_all(s, "HTTP/1.1 206 Partial Content\r\nthis line is not a header field\r\n\r\n");
        return false;
    }
    if (fault == "change" && !header_value(head, "if-match").empty() && header_value(head, "if-match") != etag) {
        write_all(s, "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n");
        return true;
    }
    std::uint64_t first = 0, last = size ? size - 1 : 0;
    std::string range = header_value(head, "range");
    bool ranged = range.rfind("bytes=", 0) == 0 && fault != "ignore" && size > 0;
    if (ranged) {
        auto dash = range.find('-');
        first = std::stoull(range.substr(6, dash - 6));
        std::string l = range.substr(dash + 1);
        if (!l.empty()) last = std::min<std::uint64_t>(std::stoull(l), size - 1);
        if (first >= size) {
            write_all(s, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(size) + "\r\nContent-Length: 0\r\n\r\n");
            return true;
        }
    }
    std::uint64_t len = size ? last - first + 1 : 0;
    std::uint64_t cr_first = fault == "badrange" ? first + 1 : first, cr_last = fault == "badrange" ? last + 1 : last;
    std::uint64_t total = fault == "badtotal" ? size + 100 : size;
    std::uint64_t body_len = fault == "longer" ? len + 1 : len;
    std::string h = ranged ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 200 OK\r\n";
    h += "ETag: " + etag + "\r\nAccept-Ranges: bytes\r\nContent-Length: " + std::to_string(body_len) + "\r\n";
    if (ranged) h += "Content-Range: bytes " + std::to_string(cr_first) + "-" + std::to_string(cr_last) + "/" + std::to_string(total) + "\r\n";
    write_all(s, h + "\r\n");
    if (fault == "close" || fault == "reset" || fault == "stall") {
        send_body(s, first, first + std::min(after, len), rate, q["id"], file);
        if (fault == "stall") wait_for_close(s);
        if (fault == "reset") s.set_option(asio::socket_base::linger(true, 0));
        return false;
    }
    send_body(s, first, first + body_len, fault == "slow" ? num("slow_rate", 100) : rate, q["id"],
              fault == "swap" ? q["other"] : file);
    return true;
}

void session(tcp::socket s) {
    ++g_connections;
    try {
        asio::streambuf buf;
        for (;;) {
            if (!serve(s, read_head(s, buf))) break;
        }
    } catch (const std::exception&) {
    }
    boost::system::error_code ec;
    s.close(ec);
}

}  // namespace

int main(int argc, char** argv) {
    serve_loopback(argc > 1 ? static_cast<unsigned short>(std::atoi(argv[1])) : 0, session);
}

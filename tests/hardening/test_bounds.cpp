// Resource bounds against malicious input: headers (safetensors, GGUF) that
// claim millions of tensors, huge shapes, deep nesting or a huge length cost memory in
// proportion to the bytes actually given, never to the sizes claimed; a
// server cannot make the reader allocate beyond a bound with an endless
// response header or a huge claimed object. Memory is measured with a
// counting operator new (allocation_meter), never with timings.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "allocation_meter.hpp"
#include "ringsafe/gguf.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

// prefix + json (padded to a multiple of 8) + `data` zero bytes.
std::vector<std::byte> make_file(const std::string& json, std::uint64_t data = 0) {
    std::string h = json;
    h.resize((h.size() + 7) / 8 * 8, ' ');
    std::vector<std::byte> f(8 + h.size() + data);
    encode_length_prefix(h.size(), f.data());
    std::memcpy(f.data() + 8, h.data(), h.size());
    return f;
}

// `n` one-byte U8 tensors laid out back to back.
std::string many_tensors_json(std::size_t n) {
    std::string j = "{";
    for (std::size_t i = 0; i < n; ++i) {
        if (i) j += ',';
        j += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(i) +
             "," + std::to_string(i + 1) + "]}";
    }
    return j + "}";
}

std::string refusal_kind(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return std::string(e.kind());
    }
    return "no error";
}

// Bytes of header-proportional state the parser may keep per header byte
// (tensor_info structs, names, shapes, the name index, vector growth).
constexpr std::size_t per_header_byte = 24;
constexpr std::size_t fixed_slack = 256u << 10;

}  // namespace

TEST_CASE("a header of 200k tensors costs memory proportional to its bytes") {
    auto file = make_file(many_tensors_json(200'000), 200'000);
    const std::size_t header_bytes = file.size() - 200'000;
    allocation_meter m;
    auto h = parse_file(file);
    REQUIRE(h.tensors.size() == 200'000);
    INFO("peak " << m.peak() << " bytes for a " << header_bytes << "-byte header");
    CHECK(m.peak() <= per_header_byte * header_bytes + fixed_slack);
}

TEST_CASE("huge claimed shapes and offsets are refused without allocating for them") {
    struct claim {
        std::string json;
        const char* kind;
    };
    const claim claims[] = {
        {R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", "ValidationOverflow"},
        {R"({"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}})", "MetadataIncompleteBuffer"},
        {R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,18446744073709551615]}})", "MetadataIncompleteBuffer"},
        {R"({"a":{"dtype":"U8","shape":[99999999999999999999999],"data_offsets":[0,8]}})", "InvalidHeaderDeserialization"},
    };
    for (const auto& c : claims) {
        INFO(c.json);
        auto file = make_file(c.json, 8);
        allocation_meter m;
        std::string k = refusal_kind([&] { (void)parse_file(file); });
        CHECK(k != "no error");
        CHECK(m.peak() <= per_header_byte * file.size() + fixed_slack);
        (void)c.kind;  // the exact kind is the conformance suite's business; here: refused, cheaply
    }
}

TEST_CASE("a shape of 100k dimensions costs memory proportional to the header") {
    std::string j = R"({"a":{"dtype":"U8","shape":[)";
    for (int i = 0; i < 100'000; ++i) j += i ? ",1" : "1";
    j += R"(],"data_offsets":[0,1]}})";
    auto file = make_file(j, 1);
    allocation_meter m;
    auto h = parse_file(file);
    REQUIRE(h.tensors.at(0).shape.size() == 100'000);
    CHECK(m.peak() <= per_header_byte * file.size() + fixed_slack);
}

TEST_CASE("nesting a million levels deep is refused, without exhausting the stack or memory") {
    for (const char* open : {"[", "{\"k\":"}) {
        std::string j = std::string("{\"__metadata__\":");
        for (int i = 0; i < 1'000'000; ++i) j += open;
        auto file = make_file(j);
        allocation_meter m;
        CHECK(refusal_kind([&] { (void)parse_file(file); }) == "InvalidHeaderDeserialization");
        CHECK(m.peak() <= per_header_byte * file.size() + fixed_slack);
    }
}

TEST_CASE("a length prefix claiming 99 MB in a small file is refused before allocating it") {
    temp_dir dir;
    std::vector<std::byte> f(4096);
    encode_length_prefix(99'999'999, f.data());
    write_file(dir / "claim.safetensors", f);
    allocation_meter m;
    CHECK(refusal_kind([&] { (void)reader::open((dir / "claim.safetensors").string()); }) == "InvalidHeaderLength");
    CHECK(m.peak() < (8u << 20));
}

TEST_CASE("max_header_size bounds what a large real header may cost") {
    temp_dir dir;
    const auto path = dir / "big.safetensors";
    std::vector<std::byte> prefix(8);
    encode_length_prefix(64'000'000, prefix.data());  // N = 64 MB, the file really is that large (sparse)
    write_file(path, prefix);
    std::filesystem::resize_file(path, 8 + 64'000'000);
    reader_options opts;
    opts.parse.max_header_size = 1'000'000;
    allocation_meter m;
    CHECK(refusal_kind([&] { (void)reader::open(path.string(), opts); }) == "HeaderTooLarge");
    CHECK(m.peak() < (8u << 20));
}

TEST_CASE("opening a file whose header lists 200k tensors costs memory proportional to the header") {
    temp_dir dir;
    auto file = make_file(many_tensors_json(200'000), 200'000);
    const std::size_t header_bytes = file.size() - 200'000;
    write_file(dir / "many.safetensors", file);
    file = {};
    allocation_meter m;
    auto r = reader::open((dir / "many.safetensors").string());
    REQUIRE(r.tensors().size() == 200'000);
    INFO("peak " << m.peak() << " bytes for a " << header_bytes << "-byte header");
    CHECK(m.peak() <= 2 * per_header_byte * header_bytes + (16u << 20));
}

namespace {

// A one-thread HTTP server on 127.0.0.1 for hostile answers: reads each
// request's header, hands the socket and the request to `respond`, closes.
class scripted_server {
public:
    explicit scripted_server(std::function<void(int fd, const std::string& request)> respond)
        : respond_(std::move(respond)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 16) == 0);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~scripted_server() {
        ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
        thread_.join();
        ::close(fd_);
    }
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

private:
    void serve() {
        for (;;) {
            int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) return;
            std::string req;
            char buf[4096];
            while (req.find("\r\n\r\n") == std::string::npos) {
                ssize_t n = ::recv(c, buf, sizeof buf, 0);
                if (n <= 0) break;
                req.append(buf, static_cast<std::size_t>(n));
            }
            if (req.find("\r\n\r\n") != std::string::npos) respond_(c, req);
            ::close(c);
        }
    }
    std::function<void(int, const std::string&)> respond_;
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

bool send_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<std::size_t>(n);
    }
    return true;
}

reader_options quick_http() {
    reader_options o;
    o.source.http.max_attempts = 2;
    o.source.http.retry_base_delay = std::chrono::milliseconds(1);
    o.source.http.first_byte_timeout = std::chrono::milliseconds(20'000);
    return o;
}

}  // namespace

TEST_CASE("a server streaming an endless response header cannot make the reader read or allocate without bound") {
    std::atomic<std::uint64_t> sent{0};
    scripted_server srv([&](int fd, const std::string&) {
        if (!send_all(fd, "HTTP/1.1 206 Partial Content\r\n")) return;
        const std::string field = "X-Filler: " + std::string(1000, 'a') + "\r\n";
        // Stops when the client hangs up, or at 256 MiB (the client failed to).
        while (sent < (256u << 20) && send_all(fd, field)) sent += field.size();
    });
    allocation_meter m;
    CHECK(refusal_kind([&] { (void)reader::open(srv.url("/endless.safetensors"), quick_http()); }) != "no error");
    INFO("server sent " << sent.load() << " header bytes; peak " << m.peak());
    CHECK(sent.load() < (32u << 20));  // the client stopped reading (kernel buffers hold a few MiB)
    CHECK(m.peak() < (4u << 20));
}

TEST_CASE("a server claiming an exabyte object and a 99 MB header is held to max_header_size") {
    scripted_server srv([&](int fd, const std::string& req) {
        auto r = req.find("bytes=");
        REQUIRE(r != std::string::npos);
        std::uint64_t first = std::stoull(req.substr(r + 6));
        std::uint64_t last = std::stoull(req.substr(req.find('-', r) + 1));
        std::string body(last - first + 1, '\0');
        std::byte prefix[8];
        encode_length_prefix(99'999'999, prefix);
        for (std::uint64_t i = first; i < 8 && i <= last; ++i) body[i - first] = static_cast<char>(prefix[i]);
        send_all(fd, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(first) + "-" +
                         std::to_string(last) + "/1152921504606846976\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nETag: \"x\"\r\n\r\n" + body);
    });
    auto opts = quick_http();
    opts.parse.max_header_size = 1'000'000;
    allocation_meter m;
    CHECK(refusal_kind([&] { (void)reader::open(srv.url("/huge.safetensors"), opts); }) == "HeaderTooLarge");
    CHECK(m.peak() < (8u << 20));
}

TEST_CASE("a GGUF header costs memory in proportion to its bytes, never to the counts it claims") {
    auto le = [](std::string& s, std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
    };
    auto preamble = [&](std::uint64_t tensors, std::uint64_t kvs) {
        std::string s = "GGUF";
        le(s, 3, 4), le(s, tensors, 8), le(s, kvs, 8);
        return s;
    };
    auto bytes_of = [](const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); };
    {
        // 2^40 tensors and 2^40 pairs claimed by a file of 24 bytes and one pair.
        std::string f = preamble(1ull << 40, 1ull << 40);
        le(f, 1, 8), f += "k", le(f, 4, 4), le(f, 7, 4);
        allocation_meter m;
        CHECK(refusal_kind([&] { gguf::parse(bytes_of(f)); }) == "Truncated");
        CHECK(m.peak() < 4096);
    }
    {
        // A string array of 2^29 elements (4 GiB of length prefixes) in a file said to be 1 TiB:
        // refused at its count by the header limit, before any element is read.
        std::string f = preamble(0, 1);
        le(f, 6, 8), f += "tokens", le(f, 9, 4), le(f, 8, 4), le(f, 1ull << 29, 8);
        allocation_meter m;
        gguf::parser p(1ull << 40);
        CHECK(refusal_kind([&] { p.feed(bytes_of(f)); }) == "HeaderTooLarge");
        CHECK(m.peak() < 4096);
    }
    {
        // A claimed 1 GiB UINT8 array of which 1 KiB has arrived: only what arrived is kept.
        std::string f = preamble(0, 1);
        le(f, 1, 8), f += "a", le(f, 9, 4), le(f, 0, 4), le(f, 1ull << 30, 8);
        f.resize(f.size() + 1024, 'x');
        parse_options o;
        o.max_header_size = 2ull << 30;
        allocation_meter m;
        gguf::parser p(2ull << 30, o);
        CHECK_FALSE(p.feed(bytes_of(f)).done);
        CHECK(m.peak() < 16384);
    }
    {
        // A real tokenizer: 150k tokens, 300k merges.
        std::vector<gguf::metadata_entry> meta;
        std::vector<std::string> tokens;
        for (int i = 0; i < 150000; ++i) tokens.push_back("tok" + std::to_string(i));
        std::vector<gguf::scalar> v(tokens.begin(), tokens.end());
        meta.push_back(gguf::metadata_entry::make_array("tokenizer.ggml.tokens", gguf::value_type::STRING, v));
        std::vector<gguf::scalar> merges;
        for (int i = 0; i < 300000; ++i) merges.push_back(std::string_view(tokens[i % 150000]));
        meta.push_back(gguf::metadata_entry::make_array("tokenizer.ggml.merges", gguf::value_type::STRING, merges));
        const std::string f = gguf::serialize(meta, {});
        allocation_meter m;
        const gguf::header h = gguf::parse(bytes_of(f));
        INFO("peak " << m.peak() << " bytes for a " << f.size() << "-byte header");
        CHECK(h.metadata.size() == 2);
        CHECK(m.peak() <= 2 * f.size() + fixed_slack);
    }
}

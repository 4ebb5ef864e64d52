// Example: a producer that computes tensors one by one (here: a few layers of
// a toy model, each a function of the previous) and streams each into the
// streaming writer as soon as it is ready, while computing the next one.
// Writes go through ringsafe::asio::async_write on the io_context: each
// tensor is copied into the writer's staging and written by its io_uring,
// whose completions wake this io_context (no thread of ringsafe's own).
//
//   streaming_producer OUT.safetensors   (default: a temp file, checked and removed)
//
// Then it reads the file back with the reader and checks every tensor.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ringsafe/asio.hpp"

namespace net = boost::asio;
namespace ra = ringsafe::asio;

namespace {

constexpr unsigned layers = 6;
constexpr std::uint64_t rows = 512, cols = 1024;

// Layer k's weights: a deterministic function of k and the previous layer.
void compute_layer(unsigned k, const std::vector<float>& prev, std::vector<float>& out) {
    out.resize(rows * cols);
    for (std::uint64_t i = 0; i < out.size(); ++i) {
        const float p = prev.empty() ? 0.0f : prev[i];
        out[i] = 0.5f * p + std::sin(static_cast<float>(i % 1000) * 0.01f + static_cast<float>(k));
    }
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

net::awaitable<void> produce(std::string path) {
    auto ex = co_await net::this_coro::executor;
    ringsafe::writer_options wo;
    wo.expected_tensors = layers;
    ra::async_writer w(ex, ringsafe::writer(path, wo));
    // Two buffers: the writer may still be using one while the next is computed.
    std::vector<float> ready, next;
    for (unsigned k = 0; k < layers; ++k) {
        compute_layer(k, ready, next);
        std::swap(ready, next);
        const std::string name = "layer." + std::to_string(k) + ".weight";
        std::vector<std::uint64_t> shape{rows, cols};
        // The buffer must stay valid until the write completes: we wait for
        // it here before the buffers are swapped again.
        co_await ra::async_write(w, name, ringsafe::dtype::F32, shape, bytes_of(ready), net::use_awaitable);
    }
    ringsafe::metadata_map meta{{"producer", "streaming_producer"}};
    const std::size_t n = co_await ra::async_finish(w, meta, net::use_awaitable);
    std::printf("wrote %u tensors, %zu data bytes, to %s\n", layers, n, path.c_str());
}

bool check(const std::string& path) {
    auto r = ringsafe::reader::open(path);
    std::vector<float> prev, expect, got(rows * cols);
    for (unsigned k = 0; k < layers; ++k) {
        compute_layer(k, prev, expect);
        prev = expect;
        std::vector<std::string> names{"layer." + std::to_string(k) + ".weight"};
        std::vector<std::span<std::byte>> dst{std::as_writable_bytes(std::span(got))};
        r.read(r.select(names), dst);
        if (std::memcmp(got.data(), expect.data(), got.size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "%s: layer %u differs\n", path.c_str(), k);
            return false;
        }
    }
    return r.metadata() && r.metadata()->at("producer") == "streaming_producer";
}

}  // namespace

int main(int argc, char** argv) {
    std::filesystem::path tmp;
    std::string path;
    if (argc >= 2) {
        path = argv[1];
    } else {
        char pattern[] = "/tmp/ringsafe-example-XXXXXX";
        if (!::mkdtemp(pattern)) return std::perror("mkdtemp"), 1;
        tmp = pattern;
        path = (tmp / "produced.safetensors").string();
    }
    int rc = 1;
    try {
        net::io_context io;
        std::exception_ptr err;
        net::co_spawn(io, produce(path), [&](std::exception_ptr e) { err = e; });
        io.run();
        if (err) std::rethrow_exception(err);
        rc = check(path) ? 0 : 1;
        if (rc == 0) std::printf("read back and checked %u tensors\n", layers);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
    }
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    return rc;
}

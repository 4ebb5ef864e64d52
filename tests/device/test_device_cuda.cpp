// Tests for include/ringsafe/device.hpp against a real CUDA runtime and GPU:
// bytes exact in device memory for every dtype, a tensor much larger than the
// staging ring, host and pinned-host destinations read directly, a bad device
// index, copies ordered after the work queued on the caller's stream; [bench] times a load into device memory against one into host memory
// (printed, never judged). Exits 77 (skipped) without a CUDA runtime or device:
// CI has none; tests/device/gpu_check.sh runs it on a GPU machine.
// Internal: the loaded runtime (device/cuda_runtime.hpp) to allocate and read back device memory.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_bytes.hpp"
#include "device/cuda_runtime.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/device.hpp"
#include "ringsafe/dtype.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

const device::cuda_api& need_cuda() {
    std::string why;
    if (!cuda_runtime_available(&why)) {
        std::fprintf(stderr, "skipped: %s\n", why.c_str());
        std::exit(77);
    }
    const auto& api = device::cuda_runtime();
    if (api.set_device(0) != device::cuda_success) {
        std::fprintf(stderr, "skipped: %s loaded but cudaSetDevice(0) failed (no GPU?)\n", api.library.c_str());
        std::exit(77);
    }
    return api;
}

// Device memory for one test, freed at the end.
struct device_memory {
    const device::cuda_api& api;
    void* p = nullptr;
    std::size_t size;
    device_memory(const device::cuda_api& a, std::size_t n) : api(a), size(n) {
        REQUIRE(api.malloc(&p, n ? n : 1) == device::cuda_success);
    }
    ~device_memory() { api.free(p); }
    std::vector<std::byte> read_back() const {
        std::vector<std::byte> out(size);
        REQUIRE(api.memcpy(out.data(), p, size, device::cuda_memcpy_device_to_host) == device::cuda_success);
        return out;
    }
};

reader open_built(const temp_dir& dir, const std::vector<tensor_spec>& specs) {
    auto f = build_file(specs);
    write_file(dir / "m.safetensors", f.bytes);
    return reader::open((dir / "m.safetensors").string());
}

}  // namespace

TEST_CASE("every dtype lands bytes exact in device memory") {
    const auto& api = need_cuda();
    std::vector<tensor_spec> specs;
    for (int i = 0; i < dtype_count; ++i) {
        const auto d = static_cast<dtype>(i);
        const std::uint64_t elems = 8 * (5000 + 91 * static_cast<std::uint64_t>(i));
        specs.push_back({"t." + std::string(dtype_name(d)), std::string(dtype_name(d)), {elems}, *dtype_bytes_for(d, elems)});
    }
    temp_dir dir;
    reader r = open_built(dir, specs);
    std::vector<std::unique_ptr<device_memory>> mem;
    std::vector<device_span> dsts;
    for (const auto& t : specs) {
        mem.push_back(std::make_unique<device_memory>(api, t.bytes));
        dsts.push_back({mem.back()->p, t.bytes});
    }
    device_options o;
    o.staging_size = 64u << 10;
    o.staging_count = 3;
    auto stats = read_to_device(r, r.all(), dsts, o);
    CHECK(stats.staged_bytes == r.total_bytes());
    for (std::size_t i = 0; i < specs.size(); ++i) CHECK(mem[i]->read_back() == tensor_bytes(specs[i].name, specs[i].bytes));
}

TEST_CASE("a tensor much larger than the staging ring, and host destinations read directly") {
    const auto& api = need_cuda();
    std::vector<tensor_spec> specs = {{"big", "BF16", {16u << 20}, 32u << 20}, {"host", "U8", {100000}, 100000},
                                      {"pinned", "U8", {70000}, 70000}};
    temp_dir dir;
    reader r = open_built(dir, specs);
    device_memory big(api, specs[0].bytes);
    std::vector<std::byte> host(specs[1].bytes);
    void* pinned = nullptr;
    REQUIRE(api.host_alloc(&pinned, specs[2].bytes, device::cuda_host_alloc_default) == device::cuda_success);
    std::vector<device_span> dsts = {{big.p, big.size}, {host.data(), host.size()}, {pinned, specs[2].bytes}};
    device_options o;
    o.staging_size = 1u << 20;
    o.staging_count = 2;
    auto stats = read_to_device(r, r.all(), dsts, o);
    CHECK(stats.batches == 32);
    CHECK(stats.direct_bytes == 170000);
    CHECK(big.read_back() == tensor_bytes("big", specs[0].bytes));
    CHECK(host == tensor_bytes("host", specs[1].bytes));
    CHECK(std::memcmp(pinned, tensor_bytes("pinned", specs[2].bytes).data(), specs[2].bytes) == 0);
    api.free_host(pinned);
}

TEST_CASE("a stager reuses its pinned ring across one-tensor reads") {
    const auto& api = need_cuda();
    std::vector<tensor_spec> specs = {{"a", "F32", {300000}, 1200000}, {"b", "F16", {4097}, 8194}, {"c", "U8", {5}, 5}};
    temp_dir dir;
    reader r = open_built(dir, specs);
    device_options o;
    o.staging_size = 256u << 10;
    o.staging_count = 3;
    device_stager s(o);
    for (int round = 0; round < 2; ++round)
        for (std::size_t i = 0; i < specs.size(); ++i) {
            device_memory m(api, specs[i].bytes);
            std::vector<device_span> one = {{m.p, m.size}};
            s.read(r, r.select({specs[i].name}), one);
            CHECK(m.read_back() == tensor_bytes(specs[i].name, specs[i].bytes));
            CHECK(s.staging_buffers() <= 3);
        }
    CHECK(s.staging_buffers() == 3);
    s.release();
    CHECK(s.staging_buffers() == 0);
}

TEST_CASE("copies wait for the work queued on the caller's stream") {
    const auto& api = need_cuda();
    // cudaLaunchHostFunc of the loaded runtime: a host function that holds the
    // caller's stream for a while, with a device-to-device copy of junk into
    // the destination queued behind it. Unordered, the copier's bytes would
    // land first and the junk over them.
    void* lib = ::dlopen(api.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(lib != nullptr);
    using host_fn = void (*)(void*);
    auto launch_host_func =
        reinterpret_cast<device::cuda_error (*)(device::cuda_stream, host_fn, void*)>(::dlsym(lib, "cudaLaunchHostFunc"));
    REQUIRE(launch_host_func != nullptr);
    constexpr std::size_t n = 8u << 20;
    temp_dir dir;
    reader r = open_built(dir, {{"w", "U8", {n}, n}});
    device_memory dst(api, n), junk(api, n);
    std::vector<std::byte> fill(n, std::byte{0x5a});
    REQUIRE(api.memcpy(junk.p, fill.data(), n, device::cuda_memcpy_default) == device::cuda_success);
    device::cuda_stream caller = nullptr;
    REQUIRE(api.stream_create_with_flags(&caller, device::cuda_stream_non_blocking) == device::cuda_success);
    REQUIRE(launch_host_func(caller, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); },
                             nullptr) == device::cuda_success);
    REQUIRE(api.memcpy_async(dst.p, junk.p, n, device::cuda_memcpy_default, caller) == device::cuda_success);
    device_options o;
    o.staging_size = 1u << 20;
    o.stream = caller;
    read_to_device(r, r.all(), std::vector<device_span>{{dst.p, n}}, o);
    REQUIRE(api.stream_synchronize(caller) == device::cuda_success);
    CHECK(dst.read_back() == tensor_bytes("w", n));
    api.stream_destroy(caller);
}

TEST_CASE("a device index that does not exist fails naming CUDA's error") {
    const auto& api = need_cuda();
    temp_dir dir;
    reader r = open_built(dir, {{"w", "F32", {10}, 40}});
    device_memory m(api, 40);
    std::vector<device_span> dsts = {{m.p, 40}};
    device_options o;
    o.device = 4096;
    std::string what = kind_of([&] { read_to_device(r, r.all(), dsts, o); });
    CHECK(what.find("IoError") == 0);
    CHECK(what.find("cudaSetDevice") != std::string::npos);
}

TEST_CASE("bench: a 1 GiB load into device memory against one into host memory", "[bench]") {
    const auto& api = need_cuda();
    const std::uint64_t n = 1ull << 30;
    temp_dir dir;
    {
        std::vector<tensor_spec> specs = {{"w", "U8", {n}, n}};
        auto f = build_header(specs);
        f.bytes.resize(f.data_start + n);
        fill_pattern(std::span(f.bytes).subspan(f.data_start), seed_of("w"));
        write_file(dir / "m.safetensors", f.bytes);
    }
    reader r = reader::open((dir / "m.safetensors").string());
    host_buffer host(n);
    std::vector<std::span<std::byte>> hd = {host.span()};
    r.read(r.all(), hd);  // warms the page cache
    const auto time = [](auto&& f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double host_s = time([&] { r.read(r.all(), hd); });
    device_memory dev(api, n);
    std::vector<device_span> dd = {{dev.p, n}};
    for (std::size_t staging : {4u << 20, 16u << 20, 64u << 20}) {
        device_options o;
        o.staging_size = staging;
        o.staging_count = 4;
        double dev_s = time([&] { read_to_device(r, r.all(), dd, o); });
        std::printf("bench device: staging %zu MiB x 4: %.2f GB/s to the device; host_buffer read %.2f GB/s (ratio %.2f)\n",
                    staging >> 20, n / dev_s / 1e9, n / host_s / 1e9, host_s / dev_s);
    }
    auto back = dev.read_back();
    CHECK(std::memcmp(back.data(), host.data(), n) == 0);
}

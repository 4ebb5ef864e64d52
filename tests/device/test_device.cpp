// Tests for include/ringsafe/device.hpp through the host stand-in (a thread
// copying into host memory that plays the device): bytes exact for every
// dtype, tensors many times larger than the staging ring, many small tensors,
// injected copy failures, reader failures, cancellation, argument checks, the
// order of the stream wait, the copies and the final event against the
// caller's stream (and the staging freed after the copier), and the clear
// error when the CUDA runtime is missing ([no_cuda], run with RINGSAFE_CUDART
// naming a library that does not exist).
// Internal: the staging pipeline over a host copier the test owns
// (device/staged_read.hpp, device/host_copier.hpp), to see that every staging
// buffer is returned and every copy waited for after a failure; the loaded
// runtime (device/cuda_runtime.hpp) where a machine has one but no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint_bytes.hpp"
#include "device/cuda_runtime.hpp"
#include "device/host_copier.hpp"
#include "device/staged_read.hpp"
#include "memory_source.hpp"
#include "ringsafe/device.hpp"
#include "ringsafe/dtype.hpp"
#include "ringsafe/reader.hpp"
#include "skip.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

constexpr auto guard = std::byte{0xA5};

struct fixture {
    std::vector<tensor_spec> specs;
    built_file file;
    memory_source* src = nullptr;
    reader r;

    explicit fixture(std::vector<tensor_spec> s) : specs(std::move(s)), file(build_file(specs)), r(make()) {}

    reader make() {
        auto s = std::make_unique<memory_source>("mem.safetensors", file.bytes);
        s->hints_.preferred_chunk = 64u << 10;
        src = s.get();
        return reader::from_source(std::move(s));
    }
};

// "Device memory" for the stand-in: one guarded host buffer per tensor, 16 bytes larger.
struct targets {
    std::vector<std::vector<std::byte>> mem;
    std::vector<device_span> spans;
    explicit targets(const std::vector<tensor_spec>& specs) {
        for (const auto& t : specs) mem.emplace_back(t.bytes + 16, guard);
        for (auto& m : mem) spans.push_back({m.data(), m.size()});
    }
    // Bytes exact, and nothing written past the tensor.
    bool exact(const std::vector<tensor_spec>& specs) const {
        for (std::size_t i = 0; i < specs.size(); ++i) {
            auto want = tensor_bytes(specs[i].name, specs[i].bytes);
            if (!want.empty() && std::memcmp(mem[i].data(), want.data(), want.size()) != 0) return false;
            for (std::size_t k = specs[i].bytes; k < mem[i].size(); ++k)
                if (mem[i][k] != guard) return false;
        }
        return true;
    }
};

device_options stand_in(std::size_t staging_size, std::size_t count) {
    device_options o;
    o.stand_in = true;
    o.staging_size = staging_size;
    o.staging_count = count;
    return o;
}

// Staging buffers a caller-owned ring holds (staged_read keeps them there).
std::size_t held(const std::vector<device::staging_block>& mem) {
    std::size_t n = 0;
    for (const auto& b : mem) n += b.data() != nullptr;
    return n;
}

// The stand-in's steps, in the order it reports them (from the copier thread and the caller's).
struct step_log {
    std::mutex m;
    std::vector<std::string> steps;
    std::function<void(const std::string&)> hook() {
        return [this](const std::string& s) {
            std::lock_guard lk(m);
            steps.push_back(s);
        };
    }
    std::vector<std::string> take() {
        std::lock_guard lk(m);
        return std::exchange(steps, {});
    }
};

std::vector<std::string> copies(std::size_t n) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back("copy " + std::to_string(i));
    return out;
}

std::vector<tensor_spec> every_dtype() {
    std::vector<tensor_spec> specs;
    for (int i = 0; i < dtype_count; ++i) {
        const auto d = static_cast<dtype>(i);
        const std::uint64_t elems = 8 * (1000 + 37 * static_cast<std::uint64_t>(i));  // whole bytes for 4- and 6-bit types
        specs.push_back({"t." + std::string(dtype_name(d)), std::string(dtype_name(d)), {elems},
                         *dtype_bytes_for(d, elems)});
    }
    return specs;
}

}  // namespace

TEST_CASE("every dtype lands bytes exact through the stand-in, straddling staging buffers") {
    fixture f(every_dtype());
    targets t(f.specs);
    std::vector<std::size_t> done;
    read_control ctl;
    ctl.on_tensor_done = [&](std::size_t target, const tensor_info&) { done.push_back(target); };
    auto stats = read_to_device(f.r, f.r.all(), t.spans, stand_in(5000, 3), ctl);
    CHECK(t.exact(f.specs));
    CHECK(done.size() == f.specs.size());
    CHECK(stats.staged_bytes == f.r.total_bytes());
    CHECK(stats.direct_bytes == 0);
    CHECK(stats.batches > 3);
}

TEST_CASE("a tensor many times larger than the staging ring recycles its buffers") {
    std::vector<tensor_spec> specs = {{"big", "F32", {262'175}, 1'048'700}, {"after", "U8", {333}, 333}};
    fixture f(specs);
    targets t(specs);
    std::vector<std::uint64_t> progress;
    std::vector<std::size_t> done;
    read_control ctl;
    ctl.on_progress = [&](std::uint64_t d, std::uint64_t total) {
        CHECK(total == f.r.total_bytes());
        progress.push_back(d);
    };
    ctl.on_tensor_done = [&](std::size_t target, const tensor_info&) { done.push_back(target); };
    auto stats = read_to_device(f.r, f.r.all(), t.spans, stand_in(4096, 2), ctl);
    CHECK(t.exact(specs));
    CHECK(stats.batches == 1'048'700 / 4096 + 1);  // "after" shares the last, partly filled buffer
    CHECK(stats.copies == stats.batches + 1);
    REQUIRE(!progress.empty());
    CHECK(std::is_sorted(progress.begin(), progress.end()));
    CHECK(progress.back() == f.r.total_bytes());
    CHECK(done == std::vector<std::size_t>{0, 1});
}

TEST_CASE("many small tensors share staging buffers") {
    std::vector<tensor_spec> specs;
    for (int i = 0; i < 3000; ++i) {
        const std::uint64_t n = 1 + static_cast<std::uint64_t>(i % 17);
        specs.push_back({"s." + std::to_string(i), "U8", {n}, n});
    }
    specs.push_back({"zero", "F32", {0}, 0});
    fixture f(specs);
    targets t(specs);
    std::size_t done = 0;
    read_control ctl;
    ctl.on_tensor_done = [&](std::size_t, const tensor_info&) { ++done; };
    auto stats = read_to_device(f.r, f.r.all(), t.spans, stand_in(64u << 10, 2), ctl);
    CHECK(t.exact(specs));
    CHECK(done == specs.size());    // the empty one too
    CHECK(stats.copies == 3000);    // none for the empty tensor
    CHECK(stats.batches < 20);      // 256-byte windows: 256 per 64 KiB buffer
}

TEST_CASE("an injected copy failure names the tensor, does not hang and returns every staging buffer") {
    std::vector<tensor_spec> specs = {{"first", "F16", {5000}, 10000}, {"second.weight", "BF16", {40000}, 80000}};
    fixture f(specs);
    targets t(specs);
    // Pieces 0..2 are "first" (4096, 4096, 1808 bytes); "second.weight" starts at piece 3.
    auto opts = stand_in(4096, 3);
    SECTION("through read_to_device") {
        device::stand_in_hooks hooks;
        hooks.fail_piece = 5;
        std::string what = kind_of([&] { device::read_with_stand_in_hooks(f.r, f.r.all(), t.spans, opts, {}, hooks); });
        CHECK(what.find("IoError") == 0);
        CHECK(what.find("'second.weight'") != std::string::npos);
        CHECK(what.find("injected copy failure") != std::string::npos);
        CHECK(device::host_copier::live_staging() == 0);
    }
    SECTION("over a copier the test owns") {
        device::stand_in_hooks hooks;
        hooks.fail_piece = 1;
        device::host_copier c(opts.staging_count, hooks);
        std::vector<device::staging_block> mem;
        std::string what = kind_of([&] { device::staged_read(f.r, f.r.all(), t.spans, opts, {}, c, mem); });
        CHECK(what.find("'first' bytes [4096, 8192)") != std::string::npos);
        CHECK(c.outstanding() == 0);
        CHECK(device::host_copier::live_staging() == held(mem));  // nothing allocated outside the ring
        mem.clear();
        CHECK(device::host_copier::live_staging() == 0);
        // A new copier works: a clean read after the failure is exact.
        device::host_copier again(opts.staging_count);
        device::staged_read(f.r, f.r.all(), t.spans, opts, {}, again, mem);
        CHECK(t.exact(specs));
        CHECK(again.outstanding() == 0);
    }
    SECTION("the non-throwing form") {
        // Its catch clauses, with a failure the stand-in can be made to raise: a staging
        // count the options refuse (the copy-failure path is the throwing form's).
        auto bad = opts;
        bad.staging_count = 1;
        status st;
        CHECK_FALSE(read_to_device(f.r, f.r.all(), t.spans, bad, {}, st));
        CHECK(st.code == errc::InvalidArgument);
        CHECK(st.message.find("staging_count") != std::string::npos);
    }
}

TEST_CASE("a read failure while copies are in flight drains them and returns every staging buffer") {
    std::vector<tensor_spec> specs = {{"a", "U8", {100000}, 100000}, {"b", "U8", {100000}, 100000}};
    fixture f(specs);
    targets t(specs);
    f.src->fail_at = f.file.data_start + f.file.begin[1] + 50000;  // in "b"
    f.src->piece = 1024;
    device::host_copier c(3);
    std::vector<device::staging_block> mem;
    std::string what = kind_of([&] { device::staged_read(f.r, f.r.all(), t.spans, stand_in(8192, 3), {}, c, mem); });
    CHECK(what.find("IoError") == 0);
    CHECK(what.find("injected failure") != std::string::npos);
    CHECK(what.find("'b'") != std::string::npos);
    CHECK(c.outstanding() == 0);
    CHECK(held(mem) <= 3);
    CHECK(device::host_copier::live_staging() == held(mem));
}

TEST_CASE("cancellation stops the load between staging buffers") {
    std::vector<tensor_spec> specs = {{"w", "F32", {100000}, 400000}};
    fixture f(specs);
    targets t(specs);
    std::atomic<bool> stop{false};
    read_control ctl;
    ctl.cancel = &stop;
    std::size_t done = 0;
    ctl.on_tensor_done = [&](std::size_t, const tensor_info&) { ++done; };
    SECTION("mid-load") {
        device::stand_in_hooks hooks;
        hooks.before_copy = [&](std::uint64_t piece) {
            if (piece == 5) stop = true;
        };
        device::host_copier c(2, hooks);
        std::vector<device::staging_block> mem;
        std::string what = kind_of([&] { device::staged_read(f.r, f.r.all(), t.spans, stand_in(4096, 2), ctl, c, mem); });
        CHECK(what.find("Cancelled") == 0);
        CHECK(done == 0);
        CHECK(c.outstanding() == 0);
        CHECK(device::host_copier::live_staging() == held(mem));
        // What did land is exact: the first 4096-byte pieces.
        auto want = tensor_bytes("w", 400000);
        CHECK(std::memcmp(t.mem[0].data(), want.data(), 5 * 4096) == 0);
        CHECK(t.mem[0][400000 - 1] == guard);
    }
    SECTION("before any I/O") {
        stop = true;
        auto opts = stand_in(4096, 2);
        std::uint64_t copies = 0;
        device::stand_in_hooks hooks;
        hooks.before_copy = [&](std::uint64_t) { ++copies; };
        CHECK(kind_of([&] { device::read_with_stand_in_hooks(f.r, f.r.all(), t.spans, opts, ctl, hooks); })
                  .find("Cancelled") == 0);
        CHECK(copies == 0);
        CHECK(f.src->executed.empty());
    }
}

TEST_CASE("a stager keeps one staging ring across reads and frees it on release") {
    std::vector<tensor_spec> specs = {{"a", "F32", {3000}, 12000}, {"b", "U8", {777}, 777}, {"c", "BF16", {9000}, 18000}};
    fixture f(specs);
    targets t(specs);
    device_stager s(stand_in(4096, 3));
    CHECK(s.staging_buffers() == 0);  // nothing before the first read
    CHECK(device::host_copier::live_staging() == 0);
    // One tensor at a time, as safe_open's get_tensor reads.
    for (std::size_t i = 0; i < specs.size(); ++i) {
        auto stats = s.read(f.r, f.r.select({specs[i].name}), std::span(t.spans).subspan(i, 1));
        CHECK(stats.staged_bytes == specs[i].bytes);
        CHECK(s.staging_buffers() <= 3);
        CHECK(device::host_copier::live_staging() == s.staging_buffers());
    }
    CHECK(t.exact(specs));
    CHECK(s.staging_buffers() == 3);  // "a" alone filled all three, and later reads reused them
    targets again(specs);
    s.read(f.r, f.r.all(), again.spans);
    CHECK(again.exact(specs));
    CHECK(device::host_copier::live_staging() == 3);
    s.release();
    CHECK(s.staging_buffers() == 0);
    CHECK(device::host_copier::live_staging() == 0);
    targets third(specs);
    s.read(f.r, f.r.all(), third.spans);  // made again on demand
    CHECK(third.exact(specs));
}

TEST_CASE("a stager frees its ring after a failure and reads cleanly next time") {
    std::vector<tensor_spec> specs = {{"a", "U8", {100000}, 100000}, {"b", "U8", {100000}, 100000}};
    fixture f(specs);
    f.src->piece = 1024;
    device_stager s(stand_in(8192, 3));
    SECTION("a read error") {
        f.src->fail_at = f.file.data_start + f.file.begin[1] + 50000;  // in "b"
        targets t(specs);
        CHECK(kind_of([&] { s.read(f.r, f.r.all(), t.spans); }).find("'b'") != std::string::npos);
        CHECK(s.staging_buffers() == 0);
        CHECK(device::host_copier::live_staging() == 0);
        f.src->fail_at.reset();
    }
    SECTION("a cancel mid-read") {
        std::atomic<bool> stop{false};
        read_control ctl;
        ctl.cancel = &stop;
        std::size_t filled = 0;
        ctl.on_progress = [&](std::uint64_t, std::uint64_t) {
            if (++filled == 2) stop = true;  // two buffers copied: the ring is allocated
        };
        targets t(specs);
        CHECK(kind_of([&] { s.read(f.r, f.r.all(), t.spans, ctl); }).find("Cancelled") == 0);
        CHECK(filled >= 2);
        CHECK(s.staging_buffers() == 0);
        CHECK(device::host_copier::live_staging() == 0);
    }
    targets t(specs);
    s.read(f.r, f.r.all(), t.spans);
    CHECK(t.exact(specs));
}

TEST_CASE("copies wait for the caller's stream and the stream waits for the copies, in that order") {
    std::vector<tensor_spec> specs = {{"w", "F32", {5000}, 20000}, {"b", "U8", {100}, 100}};
    fixture f(specs);
    step_log log;
    void* stream = reinterpret_cast<void*>(std::uintptr_t{0x5eed});
    SECTION("read_to_device") {
        targets t(specs);
        auto opts = stand_in(4096, 2);
        opts.stream = stream;
        device::stand_in_hooks hooks;
        hooks.trace = log.hook();
        auto stats = device::read_with_stand_in_hooks(f.r, f.r.all(), t.spans, opts, {}, hooks);
        CHECK(t.exact(specs));
        std::vector<std::string> want = {"wait for stream 0x5eed"};
        for (auto& c : copies(stats.copies)) want.push_back(c);
        want.insert(want.end(), {"record done", "stream 0x5eed waits for done", "copier stopped"});
        // The staging buffers go after the copier, which finishes what it queued.
        for (std::uint64_t i = 0; i < 2; ++i) want.push_back("staging freed");
        CHECK(log.take() == want);
    }
    SECTION("a stager, one stream per read") {
        auto opts = stand_in(4096, 3);
        device::stand_in_hooks hooks;
        hooks.trace = log.hook();
        device_stager s = device::stand_in_stager(opts, hooks);
        for (std::uintptr_t k : {0x10, 0x20}) {
            targets t(specs);
            auto stats = s.read(f.r, f.r.all(), t.spans, {}, reinterpret_cast<void*>(k));
            CHECK(t.exact(specs));
            const std::string name = k == 0x10 ? "0x10" : "0x20";
            std::vector<std::string> want = {"wait for stream " + name};
            // Pieces are numbered over the copier's life: the second read goes on counting.
            for (std::uint64_t i = 0; i < stats.copies; ++i)
                want.push_back("copy " + std::to_string((k == 0x10 ? 0 : stats.copies) + i));
            want.insert(want.end(), {"record done", "stream " + name + " waits for done"});
            CHECK(log.take() == want);
        }
        s.release();
        CHECK(log.take() == std::vector<std::string>{"copier stopped", "staging freed", "staging freed", "staging freed"});
    }
    SECTION("a failed copy hands nothing to the stream") {
        targets t(specs);
        auto opts = stand_in(4096, 2);
        opts.stream = stream;
        device::stand_in_hooks hooks;
        hooks.trace = log.hook();
        hooks.fail_piece = 2;
        CHECK(kind_of([&] { device::read_with_stand_in_hooks(f.r, f.r.all(), t.spans, opts, {}, hooks); })
                  .find("IoError") == 0);
        auto steps = log.take();
        REQUIRE(!steps.empty());
        CHECK(steps.front() == "wait for stream 0x5eed");
        CHECK(std::find(steps.begin(), steps.end(), "record done") == steps.end());
        CHECK(std::find(steps.begin(), steps.end(), "stream 0x5eed waits for done") == steps.end());
        // The copier stopped before its staging buffers were freed.
        auto stopped = std::find(steps.begin(), steps.end(), "copier stopped");
        REQUIRE(stopped != steps.end());
        CHECK(std::find(steps.begin(), stopped, "staging freed") == stopped);
        CHECK(device::host_copier::live_staging() == 0);
    }
}

TEST_CASE("a stager's options are checked when it is made") {
    CHECK(kind_of([] { device_stager s(stand_in(4096, 1)); }).find("InvalidArgument") == 0);
    CHECK(kind_of([] { device_stager s(stand_in(0, 2)); }).find("InvalidArgument") == 0);
    auto o = stand_in(4096, 2);
    o.device = -1;
    CHECK(kind_of([&] { device_stager s(o); }).find("device index -1") != std::string::npos);
}

TEST_CASE("destinations and options are checked before any I/O") {
    std::vector<tensor_spec> specs = {{"x", "F32", {10}, 40}, {"y", "F32", {10}, 40}};
    fixture f(specs);
    targets t(specs);
    auto opts = stand_in(4096, 2);
    std::vector<device_span> small = {t.spans[0], {t.mem[1].data(), 39}};
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), small, opts); }).find("BufferTooSmall: tensor 'y'") == 0);
    std::vector<device_span> one = {t.spans[0]};
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), one, opts); }).find("InvalidArgument") == 0);
    std::vector<device_span> overlap = {t.spans[0], {t.mem[0].data() + 8, 40}};
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), overlap, opts); }).find("overlap") != std::string::npos);
    auto bad = opts;
    bad.staging_count = 1;
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), t.spans, bad); }).find("InvalidArgument") == 0);
    bad = opts;
    bad.staging_size = 0;
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), t.spans, bad); }).find("InvalidArgument") == 0);
    bad = opts;
    bad.stand_in = false;
    device::stand_in_hooks hooks;
    hooks.fail_piece = 1;
    CHECK(kind_of([&] { device::read_with_stand_in_hooks(f.r, f.r.all(), t.spans, bad, {}, hooks); })
              .find("need stand_in") != std::string::npos);
    CHECK(kind_of([&] { device_stager s = device::stand_in_stager(bad, {}); }).find("need stand_in") != std::string::npos);
    CHECK(f.src->executed.empty());
    CHECK(t.mem[0][0] == guard);
}

TEST_CASE("without a CUDA runtime a device read fails naming what is missing", "[no_cuda]") {
    std::vector<tensor_spec> specs = {{"gpu.weight", "F32", {10}, 40}};
    fixture f(specs);
    targets t(specs);
    std::string why;
    REQUIRE_FALSE(cuda_runtime_available(&why));
    CHECK(why.find("CUDA runtime is not available") != std::string::npos);
    CHECK(why.find("libcudart") != std::string::npos);
    device_options o;  // the real CUDA path
    std::string what = kind_of([&] { read_to_device(f.r, f.r.all(), t.spans, o); });
    CHECK(what.find("InvalidArgument: GPU destination: the CUDA runtime is not available") == 0);
    CHECK(what.find("stand_in") != std::string::npos);
    // The same error again, not a retry that might half-succeed.
    CHECK(kind_of([&] { read_to_device(f.r, f.r.all(), t.spans, o); }) == what);
    CHECK(f.src->executed.empty());
    CHECK(t.mem[0][0] == guard);
}

TEST_CASE("with a CUDA runtime but no GPU, a device read fails naming CUDA's error") {
    std::string why;
    if (!cuda_runtime_available(&why)) {
        SKIP("no CUDA runtime here (" << why << ")");
    }
    const auto& api = device::cuda_runtime();
    if (api.set_device(0) == device::cuda_success) {
        SKIP(api.library << " sees a GPU; test_device_cuda covers this machine");
    }
    api.get_last_error();
    std::vector<tensor_spec> specs = {{"gpu.weight", "F32", {10}, 40}};
    fixture f(specs);
    targets t(specs);
    std::string what = kind_of([&] { read_to_device(f.r, f.r.all(), t.spans, device_options{}); });
    INFO(what);
    CHECK(what.find("IoError: GPU destination: cudaSetDevice: ") == 0);
    CHECK(what.find("for device 0") != std::string::npos);
    CHECK(f.src->executed.empty());
}

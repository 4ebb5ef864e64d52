// ringsafe::convert_file: the read/write pipeline. The selection is cut into
// batches of at most one buffer each; reader threads fill the buffers of a
// fixed pool (local files: one thread, the file source spreads its reads over
// its own rings; URLs: two threads, each with its own connections, so one
// batch's last ranges never leave the connections idle) while the streaming
// writer writes the batches, in order, straight from those buffers (zero-copy
// O_DIRECT: each batch sits in its buffer at its output offset's alignment).
// A buffer goes back to the pool when the writer's last write from it
// completes. Memory: buffers x buffer_size, allocated as the pipeline first
// needs them, plus the writer's staging blocks for unaligned edges; nothing
// grows with the file. The output is published by rename only when
// everything is written and synced; an error or a cancel leaves nothing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "convert/batches.hpp"
#include "convert/buffer_pool.hpp"
#include "convert/sink.hpp"
#include "ringsafe/convert.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"

namespace ringsafe {
namespace {

using namespace ringsafe::convert;
using clock_type = std::chrono::steady_clock;

// Batches read and not yet written (batch index -> buffer); the first read
// error; readers still running.
struct handoff {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::size_t, std::size_t> ready;
    std::string error;
    unsigned running = 0;
};

// InvalidArgument naming the option when `o` cannot convert into `target`.
void check_options(const std::string& target, const convert_options& o) {
    if (o.buffer_size < convert_min_buffer || o.buffer_size > convert_max_buffer)
        raise(errc::InvalidArgument, "buffer size " + std::to_string(o.buffer_size) + ": a buffer must hold 1 MiB to 16 GiB");
    if (o.buffers < 2 || o.buffers > convert_max_buffers)
        raise(errc::InvalidArgument, "buffers " + std::to_string(o.buffers) +
                                         ": need 2 to 1024 buffers (one being written, one being read)");
    if (o.dequantize_to != dtype::F32 && o.dequantize_to != dtype::F16 && o.dequantize_to != dtype::BF16)
        raise(errc::InvalidArgument, "dtype " + std::string(dtype_name(o.dequantize_to)) +
                                         ": GGUF block tensors become float32, float16 or bfloat16");
    const bool gguf = gguf_target(target);
    if ((o.split_max_size || o.split_max_tensors) && !gguf)
        raise(errc::InvalidArgument, "'" + target + "': split_max_size and split_max_tensors split a GGUF target (.gguf)");
    if (o.max_shard_size && gguf)
        raise(errc::InvalidArgument, "'" + target + "': max_shard_size shards a safetensors target; a GGUF target "
                                                    "splits by split_max_size");
}

}  // namespace

convert_result convert_file(const std::string& source, const std::string& target, const convert_options& o,
                            const read_control& control) {
    const auto t0 = clock_type::now();
    check_options(target, o);
    const std::uint64_t buf_size = (o.buffer_size + page - 1) / page * page;
    const auto cancelled = [&] { return control.cancel && control.cancel->load(); };

    auto r = reader::open(source, o.read);
    auto sel = o.select.empty() ? r.all() : r.select_glob(o.select);
    auto tensors = r.tensors();

    std::uint64_t total = 0;
    for (auto i : sel.indices()) total += tensors[i].size();
    // A file smaller than the pool is still cut into about one batch per
    // buffer (of at least 4 MiB), so that its reads and writes overlap too.
    const std::uint64_t spread = std::max<std::uint64_t>(4u << 20, (total / o.buffers + 2 * page - 1) / page * page);
    const auto batches = cut_batches(r, sel, std::min(buf_size, spread));

    // URLs: two readers, the connections split between them.
    bool remote = false;
    for (auto& sh : r.shards()) remote = remote || is_url(sh.spec);
    source_options so = o.read.source;
    so.http = resolved_http_options(so.http);  // the total to split: given, else environment, else default
    unsigned readers = 1;
    if (remote && so.http.connections_per_origin >= 2) {
        readers = 2;
        so.http.connections_per_origin /= 2;
    }
    readers = static_cast<unsigned>(std::min<std::size_t>({readers, batches.size(), o.buffers}));

    // Declared before the sink: the writer's holds give buffers back to the pool.
    // Buffers no larger than the largest batch needs (a small file, a small pool).
    std::uint64_t extent = page;
    for (auto& b : batches) extent = std::max(extent, b.out_offset % page + b.bytes);
    convert_result res;
    res.buffer_bytes = std::min(buf_size, (extent + page - 1) / page * page);
    std::atomic<bool> stop{false};  // a failure or the caller's cancel: everything stops, nothing is published
    buffer_pool pool(o.buffers, res.buffer_bytes, batches.size(), stop);
    handoff h;
    res.readers = readers;
    std::vector<double> read_waited(readers, 0.0);

    sink_options sk;
    sk.dequantize_to = o.dequantize_to;
    sk.direct = o.direct;
    sk.sync = o.sync;
    sk.split_max_bytes = o.split_max_size;
    sk.split_max_tensors = o.split_max_tensors;
    sk.max_shard_bytes = o.max_shard_size;
    auto made = make_sink(r, sel, target, sk);  // every check of the target's format, before any byte
    sink& w = *made;
    if (cancelled()) raise(errc::Cancelled, "copying '" + source + "' to '" + target + "': cancelled");

    auto read_loop = [&](unsigned id) {
        std::map<std::uint32_t, std::unique_ptr<ringsafe::source>> sources;  // this reader's, per shard
        io_control ctl;
        ctl.cancel = &stop;
        // An op starts at tensor `tag` and may run on into the tensors after it.
        ctl.describe = [&](std::uint32_t tag) { return "the range from tensor '" + tensors[tag].name + "'"; };
        try {
            while (auto c = pool.claim(read_waited[id])) {
                const auto& b = batches[c->batch];
                const auto& sh = r.shards()[b.shard];
                std::vector<read_op> ops;
                std::byte* dst = pool.data(c->buf) + b.out_offset % page;
                for (auto& pc : b.pieces) {
                    const std::uint64_t at = sh.data_start + tensors[pc.tensor].begin + pc.offset;
                    // Neighbours in the source (and so in the buffer) are one range: one
                    // request (URLs) or a few large reads instead of one per small tensor.
                    if (!ops.empty() && ops.back().offset + ops.back().length == at && ops.back().dst + ops.back().length == dst)
                        ops.back().length += pc.length;
                    else if (pc.length)
                        ops.push_back({at, pc.length, dst, pc.tensor});
                    dst += pc.length;
                }
                try {
                    if (!ops.empty()) {
                        auto& s = sources[b.shard];
                        if (!s) s = open_source(sh.spec, so);
                        s->execute(ops, ctl);
                    }
                } catch (...) {
                    pool.give(c->buf);
                    throw;
                }
                std::lock_guard l(h.mu);
                h.ready.emplace(c->batch, c->buf);
                h.cv.notify_all();
            }
        } catch (const std::exception& e) {
            std::lock_guard l(h.mu);
            if (h.error.empty() && !stop) h.error = e.what();  // after a stop, its Cancelled is no news
        }
        std::lock_guard l(h.mu);
        --h.running;
        h.cv.notify_all();
    };

    // Stops and joins the readers on every way out of this scope.
    std::vector<std::thread> threads;
    struct joiner {
        std::vector<std::thread>& t;
        buffer_pool& p;
        std::atomic<bool>& stop;
        ~joiner() {
            if (t.empty()) return;
            stop = true;
            p.wake_all();
            for (auto& th : t) th.join();
        }
    } join_readers{threads, pool, stop};
    h.running = readers;
    for (unsigned id = 0; id < readers; ++id) threads.emplace_back(read_loop, id);

    if (control.on_progress) control.on_progress(0, total);
    std::uint64_t done = 0;
    std::size_t ended = 0;  // tensors handed to the writer whole
    std::string failure;
    for (std::size_t k = 0; k < batches.size() && failure.empty(); ++k) {
        std::size_t buf = 0;
        {
            std::unique_lock l(h.mu);
            auto t_wait = clock_type::now();
            for (;;) {
                if (cancelled()) stop = true;  // before a batch already read: a cancel stops at the next batch
                if (stop) break;
                if (auto it = h.ready.find(k); it != h.ready.end()) {
                    buf = it->second;
                    h.ready.erase(it);
                    break;
                }
                if (!h.error.empty()) {
                    failure = h.error;
                    break;
                }
                if (h.running == 0) {
                    failure = "the reads stopped before batch " + std::to_string(k);
                    break;
                }
                if (w.writes_in_flight()) {
                    // Reap a finished write: it may hand a buffer back to a reader.
                    l.unlock();
                    try {
                        w.wait_write();
                    } catch (const std::exception& e) {
                        failure = e.what();
                    }
                    l.lock();
                    if (!failure.empty()) break;
                } else {
                    h.cv.wait_for(l, std::chrono::milliseconds(50));  // polls the caller's cancel
                }
            }
            res.write_waited += std::chrono::duration<double>(clock_type::now() - t_wait).count();
        }
        if (!failure.empty() || stop) break;
        // Released when the writer's last write from this buffer completes.
        std::shared_ptr<const void> hold(pool.data(buf), [&pool, buf](const void*) { pool.give(buf); });
        const std::byte* data = pool.data(buf) + batches[k].out_offset % page;
        try {
            for (auto& pc : batches[k].pieces) {
                const auto& t = tensors[pc.tensor];
                if (pc.offset == 0) w.begin(t);
                if (pc.length) w.append(std::span(data, pc.length), hold);
                data += pc.length;
                if (pc.offset + pc.length == t.size()) {
                    w.end();
                    if (control.on_tensor_done) control.on_tensor_done(ended, t);
                    ++ended;
                }
                done += pc.length;
            }
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (control.on_progress) control.on_progress(done, total);
    }
    if (failure.empty() && !stop && cancelled()) stop = true;  // a cancel during the last batch
    if (!failure.empty() || stop) {
        stop = true;
        w.abandon();  // releases every buffer the writer held; nothing at the target
        pool.wake_all();
        for (auto& th : threads) th.join();
        threads.clear();
        if (cancelled()) raise(errc::Cancelled, "copying '" + source + "' to '" + target + "': cancelled");
        raise(errc::IoError, "copying '" + source + "' to '" + target + "': " + failure);
    }
    for (auto& th : threads) th.join();
    threads.clear();
    w.finish();
    res.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    res.bytes = total;
    res.tensors = sel.size();
    res.files = w.files();
    res.buffers = pool.allocated();
    for (double x : read_waited) res.read_waited += x;
    return res;
}

}  // namespace ringsafe

// async_finish's operation: writer::finish as a sequence of ring operations
// whose completions arrive through the eventfd. New files: the last block is
// flushed, the header is written at offset 0 (the write ring's one-shot
// write), then the temporary's publish steps run as the ring's fsync,
// linkat / renameat, and open + fsync of the directory.
// Inline on the strand (quick metadata calls): ftruncate of the O_DIRECT
// padding, the target's permissions for the temporary (stat, fchown, fchmod
// in begin_publish), closing the descriptors. On the blocking pool: reservation-overflow
// relocation, and an append-mode writer's finish (after its data is flushed).
#include <unistd.h>

#include <cstdlib>

#include "asio/writer_ops.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::asio::detail {
namespace {

using file::temp_file;

struct finish_op final : writer_op {
    enum class stage { check, drain, header, header_wait, publish, publish_wait, appended };

    explicit finish_op(std::optional<metadata_map> m) : meta(std::move(m)) {}
    // Destroyed with the directory's descriptor reaped but not yet handed to
    // the temporary (the io_context went away): nobody else closes it.
    ~finish_op() override {
        if (at == stage::publish_wait && !pending && next.kind == temp_file::step_kind::open_dir && result >= 0)
            ::close(result);
    }
    const metadata_map* md() const noexcept { return meta ? &*meta : nullptr; }

    bool step(async_writer::impl& w) override {
        auto& c = w.core;
        for (;;) {
            switch (at) {
            case stage::check:
                c.check_finishable(md());  // errors here leave the writer usable
                abandons_on_error = true;
                logical_end = c.stream->position();
                c.stream->flush_start();
                at = stage::drain;
                break;
            case stage::drain:
                if (w.ring_busy()) return false;
                c.stream->check();
                if (c.appending) {
                    at = stage::appended;
                    committing = true;
                    w.offload([m = meta](ringsafe::writer::impl& e) { e.finish_append(m ? &*m : nullptr); },
                              [this](std::exception_ptr e) { pool_error = e; });
                    return false;
                }
                at = stage::header;
                if (c.seal(md(), logical_end)) {
                    w.offload([](ringsafe::writer::impl& e) { e.relocate(e.sealed_json, e.sealed_data); },
                              [this](std::exception_ptr e) { pool_error = e; });
                    return false;
                }
                break;
            case stage::header: {
                if (pool_error) std::rethrow_exception(pool_error);
                const std::string text = c.header_text(md());
                length = 8 + text.size();
                block = write::header_block(text);
                issue_header_write(w);
                at = stage::header_wait;
                return false;
            }
            case stage::header_wait:
                if (pending) return false;
                if (!header_written(c)) {
                    issue_header_write(w);  // a short write: the rest
                    return false;
                }
                c.published_sizes();
                c.tmp->begin_publish(c.opts.sync, c.opts.sync_dir);
                at = stage::publish;
                break;
            case stage::publish:
                next = c.tmp->next_step();
                if (next.kind == temp_file::step_kind::done) {
                    c.stream.reset();  // nothing in flight: frees the staging and the ring
                    c.finished = true;
                    n = static_cast<std::size_t>(c.stats.data_bytes);
                    return true;
                }
                issue_publish_step(w);
                at = stage::publish_wait;
                return false;
            case stage::publish_wait:
                if (pending) return false;
                c.tmp->step_done(result);  // throws as temp_file::publish() would
                at = stage::publish;
                break;
            case stage::appended:
                if (pool_error) std::rethrow_exception(pool_error);
                c.finished = true;
                n = static_cast<std::size_t>(c.stats.data_bytes);
                return true;
            }
        }
    }

    // Too late once the rename / link is submitted (or the pool runs an
    // append's commit): the file may already be in place.
    bool cancellable() const noexcept override { return !committing; }
    std::string cancelled_message(const ringsafe::writer::impl& c) const override {
        return "finishing '" + c.path + "' was cancelled: the file is abandoned";
    }

    // Runs `submit` (one of the write ring's one-shot operations) with a
    // completion that records its result.
    template <class Submit>
    void issue(async_writer::impl& w, Submit submit) {
        pending = true;
        submit(w.core.stream->ring(), [this](int r) {
            result = r;
            pending = false;
        });
    }

    void issue_header_write(async_writer::impl& w) {
        const int fd = w.core.tmp->fd();
        const std::byte* from = block.get() + written;
        const auto len = static_cast<unsigned>(length - written);
        const std::uint64_t at_offset = written;
        issue(w, [=](uring::write_ring& r, std::function<void(int)> done) {
            r.submit_write_once(fd, from, len, at_offset, std::move(done));
        });
    }

    // Accounts for the header write's result; false while bytes remain.
    bool header_written(const ringsafe::writer::impl& c) {
        const std::string what = "writing the header of '" + c.path + "'";
        if (result < 0) raise_errno(-result, what + " (file offset " + std::to_string(written) + ")", c.path);
        if (result == 0) raise(errc::IoError, what + ": no progress at file offset " + std::to_string(written));
        written += static_cast<std::uint64_t>(result);
        return written >= length;
    }

    void issue_publish_step(async_writer::impl& w) {
        const temp_file::publish_step& s = next;
        using ring = uring::write_ring;
        using done_fn = std::function<void(int)>;
        switch (s.kind) {
        case temp_file::step_kind::fsync_file:
        case temp_file::step_kind::fsync_dir:
            issue(w, [fd = s.fd](ring& r, done_fn done) { r.submit_fsync(fd, std::move(done)); });
            break;
        case temp_file::step_kind::link:
            committing = true;
            issue(w, [&s](ring& r, done_fn done) { r.submit_linkat(s.from, s.to, std::move(done)); });
            break;
        case temp_file::step_kind::rename:
            committing = true;
            issue(w, [&s](ring& r, done_fn done) { r.submit_renameat(s.from, s.to, std::move(done)); });
            break;
        case temp_file::step_kind::open_dir:
            issue(w, [&s](ring& r, done_fn done) { r.submit_open_dir(s.to, std::move(done)); });
            break;
        case temp_file::step_kind::done: break;
        }
    }

    std::optional<metadata_map> meta;
    stage at = stage::check;
    std::uint64_t logical_end = 0;
    std::unique_ptr<std::byte, void (*)(void*)> block{nullptr, std::free};
    std::uint64_t length = 0, written = 0;
    temp_file::publish_step next;
    bool pending = false;
    bool committing = false;  // the rename / link (or the append's commit) has started
    int result = 0;
    std::exception_ptr pool_error;
};

}  // namespace

std::unique_ptr<writer_op> make_finish_op(std::optional<metadata_map> metadata) {
    return std::make_unique<finish_op>(std::move(metadata));
}

}  // namespace ringsafe::asio::detail

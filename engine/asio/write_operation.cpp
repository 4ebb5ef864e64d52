// async_write's operation: the writer's own add() steps, never waiting.
#include "asio/writer_ops.hpp"

namespace ringsafe::asio::detail {
namespace {

struct write_op final : writer_op {
    explicit write_op(write_args a) : args(std::move(a)) {}

    bool step(async_writer::impl& w) override {
        auto& c = w.core;
        if (!started) {
            c.begin_add(args.name, args.type, args.shape, args.bytes.size());  // validation: no abandon
            started = true;
            abandons_on_error = true;
        }
        while (copied < args.bytes.size()) {
            const std::size_t k = c.put_ready(args.bytes.subspan(copied));
            if (k == 0) return false;  // every staging block is in flight: wait for the eventfd
            copied += k;
        }
        c.end_tensor();
        n = args.bytes.size();
        return true;
    }

    std::string cancelled_message(const ringsafe::writer::impl& c) const override {
        return "adding tensor '" + args.name + "' to '" + c.path + "' was cancelled: the file is abandoned";
    }

    write_args args;
    std::size_t copied = 0;
    bool started = false;
};

}  // namespace

std::unique_ptr<writer_op> make_write_op(write_args args) { return std::make_unique<write_op>(std::move(args)); }

}  // namespace ringsafe::asio::detail

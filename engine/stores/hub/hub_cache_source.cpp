// The Hub's cache decorator (stores/hub/hub_cache_source.hpp): a cached file
// is handed back to the dispatcher to open as a local file; any other is the
// located remote object, opened by engine/http and wrapped here. After the
// first request the source is named hf://ORG/NAME@COMMIT/PATH (an index's
// shards resolve against it), X-Linked-Size is checked against the size
// served, and every read goes through a tee (hub_tee) that hashes the bytes as
// they land and, with hub_options::cache, writes them into the cache entry,
// published only when they hash to the blob's name.
#include "stores/hub/hub_cache_source.hpp"

#include <cctype>
#include <cerrno>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "http/http_source.hpp"
#include "ringsafe/error.hpp"
#include "source/async_source.hpp"
#include "source/deferred_open.hpp"
#include "stores/hub/blob_digest.hpp"
#include "stores/hub/hub_cache.hpp"
#include "stores/hub/hub_locator.hpp"
#include "stores/hub/hub_path.hpp"
#include "stores/hub/hub_settings.hpp"
#include "stores/hub/hub_tee.hpp"

namespace ringsafe::stores {
namespace {

// A blob name the cache can hold as one file name.
bool valid_hub_blob_name(const std::string& b) {
    if (b.empty() || b.size() > 200 || b == "." || b == "..") return false;
    for (char c : b)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

std::string hub_shown(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

class hub_cache_source final : public source, public detail::async_source, public detail::deferred_open {
public:
    // `located`: the locator's object for `p` (its index when `p` names no file), whose
    // resolve hook is made again here, so that this source reads what the answers told.
    hub_cache_source(std::string spec, hub_path p, hub_settings s, http::remote_object located,
                     const http_options& opts, bool deferred)
        : spec_(std::move(spec)), name_(spec_), path_(std::move(p)), settings_(std::move(s)),
          opts_(hub_fetch_options(opts)), fallback_(path_.path.empty()) {
        if (fallback_) path_.path = std::string(hub_index_file);
        answers_ = std::make_shared<hub_resolution>(spec_, path_, settings_);
        located.resolver = hub_resolution::hook(answers_);
        if (deferred) {
            inner_ = http::prepare_remote(spec_, std::move(located), opts_);
            return;
        }
        try {
            inner_ = http::open_remote(spec_, std::move(located), opts_);
        } catch (const error&) {
            if (!fall_back()) throw;
            inner_ = http::open_remote(spec_, object(), opts_);
        }
        opened();
    }

    boost::asio::awaitable<void> first_request(boost::asio::any_io_executor ex, detail::abandon_list* abandon) override {
        std::exception_ptr failed;
        try {
            co_await inner_->first_request(ex, abandon);
        } catch (const error&) {
            failed = std::current_exception();
        }
        if (failed) {
            if (!fall_back()) std::rethrow_exception(failed);
            inner_ = http::prepare_remote(spec_, object(), opts_);
            co_await inner_->first_request(ex, abandon);
        }
        if (abandon && abandon->abandoned()) co_return;  // the caller checks
        opened();
    }

    const std::string& name() const noexcept override { return name_; }
    std::uint64_t size() const noexcept override { return inner_->size(); }
    std::span<const std::byte> prefix() const noexcept override { return inner_->prefix(); }
    source_hints hints() const noexcept override { return inner_->hints(); }

    void read_exact(std::uint64_t offset, std::span<std::byte> dst) override {
        check_digest();
        inner_->read_exact(offset, dst);
        landed(offset, dst);
        check_digest();
    }

    void execute(std::span<const read_op> ops, const io_control& ctl) override {
        check_digest();
        if (!tee_needed()) return inner_->execute(ops, ctl);
        // The ops cut into the requests engine/http makes (each one piece there, landing in
        // order from its start), so that what lands is known by offset: each piece goes into
        // the cache once all of it landed, and the digest takes the prefix as it grows.
        const tee_pieces cut = cut_for_tee(ops, size(), name_, resolved(), hashing(), ctl.describe);
        hub_tee tee(cache_, digest_, cut.pieces);
        io_control counted = ctl;
        counted.on_bytes = [&tee, &ctl, &cut](std::size_t piece, std::uint64_t n) {
            if (ctl.on_bytes) ctl.on_bytes(cut.op_of[piece], n);
            tee.landed(piece, n);
        };
        inner_->execute(cut.pieces, counted);
        tee.finish();
        check_digest();
    }

    bool can_start_async() const noexcept override { return inner_->can_start_async(); }

    std::shared_ptr<detail::async_run> start_async(const detail::async_context& ctx, std::span<const read_op> ops,
                                                   detail::async_callbacks cb) override {
        // As execute() does, on the run's callbacks: the run reads the pieces (kept with
        // the tee by its callbacks, so as long as it runs), the tee hashes and writes them
        // as they land, and what is left is done before the run reports its end.
        auto t = std::make_shared<teed>();
        if (tee_needed()) try {
                t->cut = cut_for_tee(ops, size(), name_, resolved(), hashing(), cb.describe);
                t->tee = std::make_unique<hub_tee>(cache_, digest_, t->cut.pieces);
            } catch (const error&) {
                t->tee.reset();  // an op beyond the end: the run reports it through on_done
            }
        if (t->tee)
            cb.on_bytes = [t, bytes = std::move(cb.on_bytes)](std::size_t piece, std::uint64_t n) {
                if (bytes) bytes(t->cut.op_of[piece], n);
                if (t->tee) t->tee->landed(piece, n);
            };
        if (digest_)
            cb.on_done = [t, check = digest_check(), done = std::move(cb.on_done)](std::error_code ec, std::string message,
                                                                                   bool cancelled) {
                if (!ec && !cancelled) try {
                        if (t->tee) t->tee->finish();
                        check();
                    } catch (const error& e) {
                        ec = e.code();
                        message = e.what();
                    }
                t->tee.reset();  // after a failed or cancelled run, nothing more is written or hashed
                done(ec, std::move(message), cancelled);
            };
        return inner_->start_async(ctx, t->tee ? std::span<const read_op>(t->cut.pieces) : ops, std::move(cb));
    }

private:
    // What an asynchronous run's callbacks keep: its pieces and their tee.
    struct teed {
        tee_pieces cut;
        std::unique_ptr<hub_tee> tee;
    };

    // Whether reads go through a tee: to write the cache, or to hash bytes not hashed yet.
    bool tee_needed() const { return cache_ || hashing(); }
    bool hashing() const { return digest_ && !digest_->complete(); }
    const http_options& resolved() {
        if (!resolved_) resolved_ = resolved_http_options(opts_);
        return *resolved_;
    }

    // Bytes read in one piece (the first request's, a read_exact's): into the cache, or the digest.
    void landed(std::uint64_t offset, std::span<const std::byte> bytes) {
        if (cache_) cache_->write(offset, bytes);  // hashes them too
        else if (digest_) digest_->add(offset, bytes);
    }

    // Throws ObjectChanged once the bytes read are the whole file and hash to another
    // name than the Hub's (and on every read after: the source is known to be wrong).
    std::function<void()> digest_check() const {
        return [digest = digest_, name = name_, field = blob_field_, cached = cache_ != nullptr] {
            if (!digest || !digest->complete() || digest->matches()) return;
            raise(errc::ObjectChanged, name + ": the " + std::to_string(digest->size()) + " bytes served hash to " +
                                           std::string(blob_hash_name(digest->kind())) + " " + digest->hex() +
                                           ", not to " + digest->name() + ", the blob the Hub names the file by (" +
                                           field + ")" + (cached ? "; nothing was written into the Hub cache" : ""));
        };
    }
    void check_digest() const { digest_check()(); }

    // The remote object of the file asked for now, with a fresh resolution.
    http::remote_object object() {
        answers_ = std::make_shared<hub_resolution>(spec_, path_, settings_);
        return locate_hub_file(spec_, path_, settings_, answers_);
    }

    // A repo named without a path whose index is not there: its single file instead.
    bool fall_back() {
        if (!fallback_ || !answers_->entry_missing() || path_.path != hub_index_file) return false;
        path_.path = std::string(hub_single_file);
        return true;
    }

    // After the first request: the name pinned to the commit, the size checked, the cache entry.
    void opened() {
        const hub_first_answer a = answers_->first_answer();
        const std::string& commit = a.commit;
        const std::string& blob = a.blob;
        const std::optional<std::uint64_t>& linked = a.linked_size;
        blob_field_ = a.blob_field;
        if (commit.empty()) raise(errc::HttpError, spec_ + ": the Hub's answer named no commit (X-Repo-Commit)");
        name_ = hub_url(path_, commit);
        if (linked && *linked != inner_->size())
            raise(errc::ObjectChanged, name_ + ": the Hub says X-Linked-Size " + std::to_string(*linked) +
                                           ", the file served is " + std::to_string(inner_->size()) + " bytes");
        if (settings_.write_cache) {
            if (!valid_hub_blob_name(blob) || blob_hash_of(blob) == blob_hash::none)
                raise(errc::HttpError, name_ + ": cannot write the Hub cache: the Hub's " + blob_field_ + " '" +
                                           hub_shown(blob) + "' is not a sha256 or git blob id its bytes could be checked against");
            cache_ = hub_cache_entry::open(settings_.cache_dir, path_, path_.path, path_.revision_or_main(), commit, blob,
                                           inner_->size());
        }
        // What the cache writes is always hashed; what is only read, unless asked not to.
        if (cache_) digest_ = cache_->digest();
        else if (settings_.verify != hub_options::verification::never) digest_ = blob_digest::for_blob(blob, inner_->size());
        landed(0, inner_->prefix());
        check_digest();  // a file the first answer held whole (an empty 200 among them)
    }

    std::string spec_, name_;
    hub_path path_;  // path: the file asked for now
    hub_settings settings_;
    http_options opts_;
    bool fallback_;  // no path given: the index, else the single file
    std::shared_ptr<hub_resolution> answers_;  // what the answers of the file asked for now told
    std::unique_ptr<http::remote_source> inner_;
    std::shared_ptr<hub_cache_entry> cache_;
    std::shared_ptr<blob_digest> digest_;  // the cache entry's, or this source's own; null: not checked
    std::string blob_field_;               // the field that named the blob (X-Linked-Etag, ETag)
    std::optional<http_options> resolved_; // opts_ resolved, to cut ops as engine/http does
};

}  // namespace

std::optional<hub_cache_hit> find_hub_cached(const std::string& url, const http_options& opts,
                                            const store_options& stores) {
    const hub_path p = parse_hub_url(url);
    const hub_settings s = hub_settings_of(stores.hub, opts);
    if (auto hit = find_in_hub_cache(s.cache_dir, p)) {
        if (s.verify == hub_options::verification::always) verify_cached_file(*hit, url);
        hub_path pinned = p;
        pinned.path = hit->path;
        return hub_cache_hit{hit->local, hub_url(pinned, hit->commit)};
    }
    if (s.offline) {
        const std::string place = hub_cache_place(s.cache_dir, p);
        raise_errno(ENOENT, url + " is not in the Hub cache, and the Hub is offline (HF_HUB_OFFLINE, or local_files_only): looked for " +
                                place,
                    place);
    }
    return std::nullopt;
}

std::unique_ptr<source> open_hub_cached(const std::string& url, http::remote_object located, const http_options& opts,
                                        const store_options& stores, bool deferred) {
    return std::make_unique<hub_cache_source>(url, parse_hub_url(url), hub_settings_of(stores.hub, opts), std::move(located), opts,
                                              deferred);
}

}  // namespace ringsafe::stores

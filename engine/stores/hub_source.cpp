// hf:// sources (stores/locate.hpp, open_hub): a file in the Hub cache is
// handed back as a local file; any other is resolved at the Hub as
// huggingface_hub resolves it (file_download.get_hf_file_metadata): a Range
// GET of {endpoint}/ORG/NAME/resolve/REVISION/PATH with the token, whose
// answer (a 302 to the CDN, or the bytes themselves) carries X-Repo-Commit,
// X-Linked-Etag and X-Linked-Size. The first answer pins the commit: the
// source is named hf://ORG/NAME@COMMIT/PATH (an index's shards resolve
// against it), later requests and re-resolutions (a presigned CDN URL that
// expired: 403/410) ask for that commit, and an answer of another commit,
// blob or size is ObjectChanged. engine/http follows the redirect and leaves
// the token behind at the Hub's origin.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "http/http_source.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "source/async_source.hpp"
#include "source/deferred_open.hpp"
#include "stores/blob_digest.hpp"
#include "stores/hub_cache.hpp"
#include "stores/hub_path.hpp"
#include "stores/hub_settings.hpp"
#include "stores/hub_tee.hpp"
#include "stores/locate.hpp"

namespace ringsafe::stores {
namespace {

using http::header_fields;
using http::remote_object;
using http::url;

// file_download._normalize_etag: etag.lstrip("W/").strip('"').
std::string normalize_hub_etag(std::string e) {
    const auto start = e.find_first_not_of("W/");
    e = start == std::string::npos ? std::string() : e.substr(start);
    const auto first = e.find_first_not_of('"');
    if (first == std::string::npos) return {};
    return e.substr(first, e.find_last_not_of('"') - first + 1);
}

// A blob name the cache can hold as one file name.
bool valid_hub_blob_name(const std::string& b) {
    if (b.empty() || b.size() > 200 || b == "." || b == "..") return false;
    for (char c : b)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

std::optional<std::uint64_t> parse_hub_size(const std::string& s) {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
}

std::string hub_shown(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

// What the Hub's answers told, shared by a source and its remote object's hook
// (which runs on the event loops: under the mutex).
struct hub_answers {
    std::mutex mutex;
    std::string spec;       // the URL as given
    hub_path path;          // with the file asked for
    std::string endpoint;
    std::string token_origin;  // empty: no token sent
    std::string commit;     // pinned by the first answer
    std::string blob;       // X-Linked-Etag, else ETag, normalized
    std::string blob_field; // which of the two named it
    std::optional<std::uint64_t> linked_size;
    bool entry_missing = false;  // a 404 for the file (not the repo or revision)

    std::string repo() const { return path.type + " " + path.repo; }

    [[noreturn]] void refused(unsigned status, const std::string& code) {
        std::string why;
        if (token_origin.empty())
            why = code == "GatedRepo" ? repo() + " is gated: a token is needed"
                                      : repo() + " is private or gated (or does not exist): a token is needed";
            else why = "the token (from " + token_origin + ") gives no access to " + repo() +
                   (code == "GatedRepo" ? " (gated: accept its conditions at " + endpoint + "/" + path.repo + ")"
                                        : " (private, gated, or missing)");
        if (token_origin.empty()) why += " (set HF_TOKEN, or log in with `hf auth login`)";
        raise(errc::HttpError, spec + ": the Hub answered HTTP " + std::to_string(status) +
                                   (code.empty() ? "" : " (" + code + ")") + ": " + why);
    }

    // engine/http's hook for each answer of the Hub's origin.
    void on_response(remote_object& obj, const url& target, unsigned status, const header_fields& f) {
        const std::string code = http::field_value(f, "X-Error-Code");
        if (status == 401 || status == 403) refused(status, code);
        if (status == 404) {
            std::lock_guard lock(mutex);
            if (code == "RepoNotFound")
                raise(errc::HttpError, spec + ": the Hub answered HTTP 404 (RepoNotFound): " + repo() +
                                           " does not exist" + (token_origin.empty() ? " (or is private: a token is needed)" : ""));
            if (code == "RevisionNotFound")
                raise(errc::HttpError, spec + ": the Hub answered HTTP 404 (RevisionNotFound): revision '" +
                                           path.revision_or_main() + "' is not in " + repo());
            entry_missing = true;
            raise(errc::HttpError, spec + ": the Hub answered HTTP 404" + (code.empty() ? "" : " (" + code + ")") +
                                       ": no file '" + path.path + "' in " + repo() + " at '" +
                                       (commit.empty() ? path.revision_or_main() : commit) + "'");
        }
        if (status / 100 != 2 && status / 100 != 3) return;  // engine/http retries or reports it
        const std::string commit_field = http::field_value(f, "X-Repo-Commit");
        if (commit_field.empty()) {
            if (status / 100 == 3) {  // a hop within the Hub (a renamed repo) may come before the commit
                try {
                    if (http::resolve_location(target, http::field_value(f, "Location")).origin() == target.origin()) return;
                } catch (const error&) {
                    return;  // engine/http reports the Location
                }
            }
            raise(errc::HttpError, spec + ": the answer of " + target.shown() + " (HTTP " + std::to_string(status) +
                                       ") has no X-Repo-Commit: " + endpoint + " does not answer as a Hugging Face Hub");
        }
        if (!is_commit_hash(commit_field))
            raise(errc::HttpError, spec + ": the answer of " + target.shown() + " has X-Repo-Commit '" + hub_shown(commit_field) +
                                       "', not a commit id");
        std::string blob = http::field_value(f, "X-Linked-Etag");
        const char* field = blob.empty() ? "ETag" : "X-Linked-Etag";
        blob = normalize_hub_etag(blob.empty() ? http::field_value(f, "ETag") : blob);
        std::optional<std::uint64_t> linked;
        if (const std::string ls = http::field_value(f, "X-Linked-Size"); !ls.empty()) {
            linked = parse_hub_size(ls);
            if (!linked) raise(errc::HttpError, spec + ": X-Linked-Size '" + hub_shown(ls) + "' is not a size");
        }
        std::lock_guard lock(mutex);
        if (commit.empty()) {  // the first answer: pin its commit for every later request
            commit = commit_field;
            this->blob = blob;
            blob_field = field;
            linked_size = linked;
            const bool at_requested = obj.location.str() == obj.requested.str();
            obj.requested = http::parse_url(hub_resolve_url(endpoint, path, commit));
            if (at_requested) obj.location = obj.requested;
            return;
        }
        if (commit_field != commit)
            raise(errc::ObjectChanged, spec + ": pinned to commit " + commit + ", the Hub now answers commit " + commit_field);
        if (!blob.empty() && !this->blob.empty() && blob != this->blob)
            raise(errc::ObjectChanged, spec + ": the file at commit " + commit + " was blob " + this->blob +
                                           ", the Hub now answers " + hub_shown(blob));
        if (linked && obj.size && *linked != *obj.size)
            raise(errc::ObjectChanged, spec + ": the file is " + std::to_string(*obj.size) +
                                           " bytes, the Hub now answers X-Linked-Size " + std::to_string(*linked));
    }
};

class hub_source final : public source, public detail::async_source, public detail::deferred_open {
public:
    hub_source(std::string spec, hub_path p, hub_settings s, const http_options& opts, bool deferred)
        : spec_(std::move(spec)), name_(spec_), path_(std::move(p)), settings_(std::move(s)), opts_(opts),
          fallback_(path_.path.empty()) {
        // The token goes by the sign hook alone, to the Hub's origin only: a bearer token given
        // in the options is the Hub's token, which cross_origin_headers must not let follow a redirect.
        opts_.bearer_token.clear();
        if (fallback_) path_.path = std::string(hub_index_file);
        if (deferred) {
            inner_ = http::prepare_remote(spec_, object(), opts_);
            return;
        }
        try {
            inner_ = http::open_remote(spec_, object(), opts_);
        } catch (const error&) {
            if (!fall_back()) throw;
            inner_ = http::open_remote(spec_, object(), opts_);
        }
        opened();
    }

    boost::asio::awaitable<void> first_request(boost::asio::any_io_executor ex, detail::abandon_list* abandon) override {
        std::exception_ptr failed;
        try {
            co_await detail::deferred_side(*inner_).first_request(ex, abandon);
        } catch (const error&) {
            failed = std::current_exception();
        }
        if (failed) {
            if (!fall_back()) std::rethrow_exception(failed);
            inner_ = http::prepare_remote(spec_, object(), opts_);
            co_await detail::deferred_side(*inner_).first_request(ex, abandon);
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

    bool can_start_async() const noexcept override { return async_side().can_start_async(); }

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
        return async_side().start_async(ctx, t->tee ? std::span<const read_op>(t->cut.pieces) : ops, std::move(cb));
    }

private:
    detail::async_source& async_side() const { return dynamic_cast<detail::async_source&>(*inner_); }

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

    // The remote object of the file asked for now: the resolve URL at the revision asked for.
    remote_object object() {
        answers_ = std::make_shared<hub_answers>();
        answers_->spec = spec_;
        answers_->path = path_;
        answers_->endpoint = settings_.endpoint;
        if (!settings_.token.empty()) answers_->token_origin = settings_.token_origin;
        remote_object obj;
        const std::string resolve = hub_resolve_url(settings_.endpoint, path_, path_.revision_or_main());
        try {
            obj.requested = obj.location = http::parse_url(resolve);
        } catch (const error& e) {
            raise(errc::InvalidArgument, spec_ + ": the Hub endpoint '" + settings_.endpoint +
                                             "' (HF_ENDPOINT, or hub_options::endpoint) does not make a URL: " + e.what());
        }
        obj.resolver = true;
        obj.on_origin_response = [a = answers_](remote_object& o, const url& t, unsigned status, const header_fields& f) {
            a->on_response(o, t, status, f);
        };
        if (!settings_.token.empty())
            obj.sign = [token = settings_.token](const url&, std::string_view, const header_fields&) {
                return header_fields{{"Authorization", "Bearer " + token}};
            };
        return obj;
    }

    // A repo named without a path whose index is not there: its single file instead.
    bool fall_back() {
        bool missing;
        {
            std::lock_guard lock(answers_->mutex);
            missing = answers_->entry_missing;
        }
        if (!fallback_ || !missing || path_.path != hub_index_file) return false;
        path_.path = std::string(hub_single_file);
        return true;
    }

    // After the first request: the name pinned to the commit, the size checked, the cache entry.
    void opened() {
        std::string commit, blob;
        std::optional<std::uint64_t> linked;
        {
            std::lock_guard lock(answers_->mutex);
            commit = answers_->commit;
            blob = answers_->blob;
            blob_field_ = answers_->blob_field;
            linked = answers_->linked_size;
        }
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
    std::shared_ptr<hub_answers> answers_;
    std::unique_ptr<source> inner_;
    std::shared_ptr<hub_cache_entry> cache_;
    std::shared_ptr<blob_digest> digest_;  // the cache entry's, or this source's own; null: not checked
    std::string blob_field_;               // the field that named the blob (X-Linked-Etag, ETag)
    std::optional<http_options> resolved_; // opts_ resolved, to cut ops as engine/http does
};

}  // namespace

store_answer open_hub(const std::string& url, const http_options& opts, bool deferred) {
    hub_path p = parse_hub_url(url);
    hub_settings s = hub_settings_of(opts);
    if (auto hit = find_in_hub_cache(s.cache_dir, p)) {
        if (s.verify == hub_options::verification::always) verify_cached_file(*hit, url);
        hub_path pinned = p;
        pinned.path = hit->path;
        return {nullptr, hit->local, hub_url(pinned, hit->commit)};
    }
    if (s.offline) {
        const std::string place = hub_cache_place(s.cache_dir, p);
        raise_errno(ENOENT, url + " is not in the Hub cache, and the Hub is offline (HF_HUB_OFFLINE, or local_files_only): looked for " +
                                place,
                    place);
    }
    return {std::make_unique<hub_source>(url, std::move(p), std::move(s), opts, deferred), {}, {}};
}

}  // namespace ringsafe::stores

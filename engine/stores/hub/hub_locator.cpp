// hf:// located as a remote object (stores/hub/hub_locator.hpp): the resolve
// URL, the token, and the Hub's resolve hook, which reads every answer of the
// Hub's origin and pins the commit of the first.
#include "stores/hub/hub_locator.hpp"

#include <utility>

#include "http/url.hpp"
#include "ringsafe/error.hpp"

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

std::optional<std::uint64_t> parse_hub_size(const std::string& s) {
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
}

std::string hub_answer_shown(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

}  // namespace

hub_resolution::hub_resolution(std::string spec, hub_path path, const hub_settings& s)
    : spec_(std::move(spec)), path_(std::move(path)), endpoint_(s.endpoint) {
    if (!s.token.empty()) token_origin_ = s.token_origin;
}

http::resolve_hook hub_resolution::hook(std::shared_ptr<hub_resolution> r) {
    return {[r = std::move(r)](remote_object& o, const url& t, unsigned status, const header_fields& f) {
        r->on_answer(o, t, status, f);
    }};
}

hub_first_answer hub_resolution::first_answer() const {
    std::lock_guard lock(mutex_);
    return first_;
}

bool hub_resolution::entry_missing() const {
    std::lock_guard lock(mutex_);
    return entry_missing_;
}

void hub_resolution::refused(unsigned status, const std::string& code) const {
    std::string why;
    if (token_origin_.empty())
        why = code == "GatedRepo" ? repo() + " is gated: a token is needed"
                                  : repo() + " is private or gated (or does not exist): a token is needed";
    else
        why = "the token (from " + token_origin_ + ") gives no access to " + repo() +
              (code == "GatedRepo" ? " (gated: accept its conditions at " + endpoint_ + "/" + path_.repo + ")"
                                   : " (private, gated, or missing)");
    if (token_origin_.empty()) why += " (set HF_TOKEN, or log in with `hf auth login`)";
    raise(errc::HttpError, spec_ + ": the Hub answered HTTP " + std::to_string(status) +
                               (code.empty() ? "" : " (" + code + ")") + ": " + why);
}

void hub_resolution::on_answer(remote_object& obj, const url& target, unsigned status, const header_fields& f) {
    const std::string code = http::field_value(f, "X-Error-Code");
    if (status == 401 || status == 403) refused(status, code);
    if (status == 404) {
        std::lock_guard lock(mutex_);
        if (code == "RepoNotFound")
            raise(errc::HttpError, spec_ + ": the Hub answered HTTP 404 (RepoNotFound): " + repo() + " does not exist" +
                                       (token_origin_.empty() ? " (or is private: a token is needed)" : ""));
        if (code == "RevisionNotFound")
            raise(errc::HttpError, spec_ + ": the Hub answered HTTP 404 (RevisionNotFound): revision '" +
                                       path_.revision_or_main() + "' is not in " + repo());
        entry_missing_ = true;
        raise(errc::HttpError, spec_ + ": the Hub answered HTTP 404" + (code.empty() ? "" : " (" + code + ")") +
                                   ": no file '" + path_.path + "' in " + repo() + " at '" +
                                   (first_.commit.empty() ? path_.revision_or_main() : first_.commit) + "'");
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
        raise(errc::HttpError, spec_ + ": the answer of " + target.shown() + " (HTTP " + std::to_string(status) +
                                   ") has no X-Repo-Commit: " + endpoint_ + " does not answer as a Hugging Face Hub");
    }
    if (!is_commit_hash(commit_field))
        raise(errc::HttpError, spec_ + ": the answer of " + target.shown() + " has X-Repo-Commit '" +
                                   hub_answer_shown(commit_field) + "', not a commit id");
    std::string blob = http::field_value(f, "X-Linked-Etag");
    const char* field = blob.empty() ? "ETag" : "X-Linked-Etag";
    blob = normalize_hub_etag(blob.empty() ? http::field_value(f, "ETag") : blob);
    std::optional<std::uint64_t> linked;
    if (const std::string ls = http::field_value(f, "X-Linked-Size"); !ls.empty()) {
        linked = parse_hub_size(ls);
        if (!linked) raise(errc::HttpError, spec_ + ": X-Linked-Size '" + hub_answer_shown(ls) + "' is not a size");
    }
    std::lock_guard lock(mutex_);
    if (first_.commit.empty()) {  // the first answer: pin its commit for every later request
        first_ = {commit_field, blob, field, linked};
        const bool at_requested = obj.location.str() == obj.requested.str();
        obj.requested = http::parse_url(hub_resolve_url(endpoint_, path_, first_.commit));
        if (at_requested) obj.location = obj.requested;
        return;
    }
    if (commit_field != first_.commit)
        raise(errc::ObjectChanged,
              spec_ + ": pinned to commit " + first_.commit + ", the Hub now answers commit " + commit_field);
    if (!blob.empty() && !first_.blob.empty() && blob != first_.blob)
        raise(errc::ObjectChanged, spec_ + ": the file at commit " + first_.commit + " was blob " + first_.blob +
                                       ", the Hub now answers " + hub_answer_shown(blob));
    if (linked && obj.size && *linked != *obj.size)
        raise(errc::ObjectChanged, spec_ + ": the file is " + std::to_string(*obj.size) +
                                       " bytes, the Hub now answers X-Linked-Size " + std::to_string(*linked));
}

remote_object locate_hub_file(const std::string& spec, const hub_path& p, const hub_settings& s,
                              std::shared_ptr<hub_resolution> r) {
    remote_object obj;
    const std::string resolve = hub_resolve_url(s.endpoint, p, p.revision_or_main());
    try {
        obj.requested = obj.location = http::parse_url(resolve);
    } catch (const error& e) {
        raise(errc::InvalidArgument, spec + ": the Hub endpoint '" + s.endpoint +
                                         "' (HF_ENDPOINT, or hub_options::endpoint) does not make a URL: " + e.what());
    }
    obj.resolver = hub_resolution::hook(std::move(r));
    if (!s.token.empty())
        obj.sign = [token = s.token](const url&, std::string_view, const header_fields&) {
            return header_fields{{"Authorization", "Bearer " + token}};
        };
    return obj;
}

remote_object locate_hub(const std::string& url, const http_options& opts, const store_options& stores) {
    hub_path p = parse_hub_url(url);
    const hub_settings s = hub_settings_of(stores.hub, opts);
    if (p.path.empty()) p.path = std::string(hub_index_file);
    return locate_hub_file(url, p, s, std::make_shared<hub_resolution>(url, p, s));
}

http_options hub_fetch_options(const http_options& opts) {
    http_options o = opts;
    o.bearer_token.clear();
    return o;
}

}  // namespace ringsafe::stores

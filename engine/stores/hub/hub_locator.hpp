// hf:// located as the other stores' URLs are (stores/locate.hpp): the
// remote object of a file at the Hub, resolved as huggingface_hub resolves it
// (file_download.get_hf_file_metadata): a Range GET of
// {endpoint}/ORG/NAME/resolve/REVISION/PATH with the token, whose answer (a
// 302 to the CDN, or the bytes themselves) carries X-Repo-Commit,
// X-Linked-Etag and X-Linked-Size. The first answer pins the commit: later
// requests and re-resolutions (a presigned CDN URL that expired: 403/410) ask
// for that commit, and an answer of another commit, blob or size is
// ObjectChanged. engine/http follows the redirect and leaves the token behind
// at the Hub's origin. The cache around it: stores/hub/hub_cache_source.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "http/remote_object.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"
#include "stores/hub/hub_path.hpp"
#include "stores/hub/hub_settings.hpp"

namespace ringsafe::stores {

// What the first answer for a file told (empty commit: no answer yet).
struct hub_first_answer {
    std::string commit;       // X-Repo-Commit: pins every later request
    std::string blob;         // X-Linked-Etag, else ETag, normalized
    std::string blob_field;   // which of the two named it
    std::optional<std::uint64_t> linked_size;  // X-Linked-Size
};

// The Hub's resolve hook for one file: reads and checks each answer of the
// Hub's origin (engine/http calls it on its event loops: under a mutex), fails
// a refused, missing or foreign answer with the Hub's own reason, pins the
// object's `requested` to the first answer's commit, and keeps what that
// answer told for the source that reads the file (its cache decorator).
class hub_resolution {
public:
    // `spec`: the URL as given (messages); `path`: with the file asked for.
    hub_resolution(std::string spec, hub_path path, const hub_settings& s);

    // The resolve hook of a remote object that feeds `r`.
    static http::resolve_hook hook(std::shared_ptr<hub_resolution> r);

    // What the first answer told (its commit empty before one came).
    hub_first_answer first_answer() const;
    // Whether an answer was a 404 for the file (not the repo or the revision).
    bool entry_missing() const;

    // engine/http's hook for each answer of the Hub's origin.
    void on_answer(http::remote_object& obj, const http::url& target, unsigned status, const http::header_fields& f);

private:
    std::string repo() const { return path_.type + " " + path_.repo; }
    [[noreturn]] void refused(unsigned status, const std::string& code) const;

    mutable std::mutex mutex_;
    std::string spec_;
    hub_path path_;
    std::string endpoint_;
    std::string token_origin_;  // empty: no token sent
    hub_first_answer first_;
    bool entry_missing_ = false;
};

// hf://[datasets/|spaces/]ORG/NAME[@REVISION][/PATH]: the file's resolve URL
// on the Hub's endpoint (stores.hub, else the HF_* environment: hub_settings_of)
// at the revision asked for (a repo named without a path: its index), the
// token signed onto requests to the Hub's origin only, and the Hub's resolve
// hook. Throws InvalidArgument naming the URL for a malformed one, or an
// endpoint that makes no URL; reads no network.
http::remote_object locate_hub(const std::string& url, const http_options& opts, const store_options& stores);

// The same for the file `p` names (`spec` in messages), its answers read by `r`.
http::remote_object locate_hub_file(const std::string& spec, const hub_path& p, const hub_settings& s,
                                    std::shared_ptr<hub_resolution> r);

// The options to fetch a located Hub object with: `opts` without its bearer
// token, which is the Hub's token (hub_settings_of) and goes by the object's
// sign hook alone, to the Hub's origin only (cross_origin_headers must not let
// it follow a redirect to the CDN).
http_options hub_fetch_options(const http_options& opts);

}  // namespace ringsafe::stores

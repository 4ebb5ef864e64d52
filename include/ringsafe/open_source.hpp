// Opening any source by name: a local path, or a URL of one of the six schemes
// http://, https://, s3://, gs://, az:// and hf:// (an hf:// file in the Hub
// cache opens as that local file).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ringsafe/file_source.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/source.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe {

// Opens an http://, https://, s3://bucket/key, gs://bucket/object,
// az://container/blob or hf://ORG/NAME[@REV][/PATH] URL with one Range request of
// `prefetch` bytes, which gives the size, the validator (ETag/Last-Modified)
// and prefix(). Throws ringsafe::error naming the URL: InvalidArgument (bad
// URL or options, a header name or value, token or S3 credential holding CR,
// LF or NUL), HttpError (status such as 401/403/404, TLS or connection
// failure after retries, a token endpoint's refusal), RangeNotSupported (the
// server ignores Range). A gs:// object that needs an OAuth token fetches it
// inside its first request (and again before it expires), never before it.
// The source's execute() runs its own event loop on the calling thread, and
// threads-1 more on threads it starts and joins before returning. An hf://
// URL is resolved at the Hub (stores.hub) and named by its pinned commit
// (hf://ORG/NAME@COMMIT/PATH); one found in the Hub cache opens as that
// local file with no request (engine/stores/README.md).
std::unique_ptr<source> open_url(const std::string& url, const http_options& opts = {},
                                 const store_options& stores = {});

// Options for open_source(): one set per kind of source.
struct source_options {
    file_options file;     // local paths
    http_options http;     // the transport of every URL
    store_options stores;  // each store's credentials and endpoint (s3://, gs://, az://, hf://)
};

// True when `spec` names a remote object: it starts with one of the six
// schemes above (any case); anything else is a local path.
bool is_url(std::string_view spec) noexcept;

// Opens a local path or a URL (see is_url) with the matching options.
// Throws ringsafe::error naming the path or URL.
std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts = {});

}  // namespace ringsafe

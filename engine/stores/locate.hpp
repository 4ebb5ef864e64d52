// The object stores a URL can name, each turned into the remote object that
// engine/http fetches: the endpoint URL, credentials (from the options, else
// the store's own environment variables) and the signing of each request.
// One locator per scheme (or, for a store that opens its own sources, one
// opener); the dispatcher (engine/dispatch/open_source.cpp) picks it.
#pragma once

#include <memory>
#include <string>

#include "http/range_fetch.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::stores {

// http:// and https:// URLs: the object at that URL (the caller's headers and
// bearer token go to its origin only); an Azure Blob host's URL is located by
// locate_azure_url.
http::remote_object locate_http(const std::string& url, const http_options& opts);

// s3://bucket/key: the endpoint and addressing of opts.s3 (empty fields from
// the AWS_* environment), requests signed with SigV4 (unsigned without an
// access key: public buckets). Throws InvalidArgument naming the URL for a
// credential that would split a request or a key id without its secret.
http::remote_object locate_s3(const std::string& url, const http_options& opts);

// gs://bucket/object: the XML API URL on opts.gcs's endpoint (empty fields
// from the environment), generation pinning, and the credentials found first
// (gcs_credentials.hpp): an OAuth token fetched in the first request, GOOG4
// HMAC signing, or none. Throws InvalidArgument naming the URL for a bad URL,
// endpoint or credentials file; reads no network.
http::remote_object locate_gcs(const std::string& url, const http_options& opts);

// az://container/blob: the blob on the account's endpoint (opts.azure, empty
// fields from the environment), signed with Shared Key or carrying the SAS
// token, x-ms-version on every request. Throws InvalidArgument naming the URL
// when no account is known, or for a malformed connection string, key or token.
http::remote_object locate_azure(const std::string& url, const http_options& opts);

// https://ACCOUNT.blob.core.windows.net/container/blob[?query]: a query
// holding a SAS signature (sig=) is used as it is; otherwise the account's
// key or SAS token from opts.azure or the environment (only when it names
// this account, or none).
http::remote_object locate_azure_url(const std::string& url, const http_options& opts);

// What a store that opens its own sources answers: the source, or a local file
// holding the same bytes (its cache), which the dispatcher opens as a local
// file (io_uring; no request) named `name`.
struct store_answer {
    std::unique_ptr<source> src;
    std::string local_file;
    std::string name;  // the URL pinned (hf://ORG/NAME@COMMIT/PATH): messages, and an index's shards resolve against it
};

// hf://[datasets/|spaces/]ORG/NAME[@REVISION][/PATH] (hub_source.cpp): the file in
// the Hub cache when it is there, else a source that resolves it at the Hub
// (opts.hub, else the HF_* environment), pins the commit of the first answer,
// follows the redirect to the CDN without the token, and writes the cache when
// asked. `deferred`: the source before its first request (a deferred_open).
// Throws InvalidArgument naming the URL for a malformed one, ENOENT (system
// category) for a file not in the cache when offline.
store_answer open_hub(const std::string& url, const http_options& opts, bool deferred);

}  // namespace ringsafe::stores

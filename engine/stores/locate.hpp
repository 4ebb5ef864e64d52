// The object stores a URL can name, each turned into the remote object that
// engine/http fetches: the endpoint URL, credentials (from the options, else
// the store's own environment variables) and the signing of each request.
// One locator per scheme; the dispatcher (engine/dispatch/open_source.cpp)
// picks it.
#pragma once

#include <string>

#include "http/remote_object.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::stores {

// http:// and https:// URLs: the object at that URL (the caller's headers and
// bearer token go to its origin only); an Azure Blob host's URL is located by
// locate_azure_url with stores.azure.
http::remote_object locate_http(const std::string& url, const http_options& opts, const store_options& stores);

// s3://bucket/key: the endpoint and addressing of stores.s3 (empty fields from
// the AWS_* environment), requests signed with SigV4 (unsigned without an
// access key: public buckets). Throws InvalidArgument naming the URL for a
// credential that would split a request or a key id without its secret.
http::remote_object locate_s3(const std::string& url, const http_options& opts, const store_options& stores);

// gs://bucket/object: the XML API URL on stores.gcs's endpoint (empty fields
// from the environment), generation pinning, and the credentials found first
// (gcs_credentials.hpp): an OAuth token fetched in the first request, GOOG4
// HMAC signing, or none. Throws InvalidArgument naming the URL for a bad URL,
// endpoint or credentials file; reads no network.
http::remote_object locate_gcs(const std::string& url, const http_options& opts, const store_options& stores);

// az://container/blob: the blob on the account's endpoint (stores.azure, empty
// fields from the environment), signed with Shared Key or carrying the SAS
// token, x-ms-version on every request. Throws InvalidArgument naming the URL
// when no account is known, or for a malformed connection string, key or token.
http::remote_object locate_azure(const std::string& url, const http_options& opts, const store_options& stores);

// https://ACCOUNT.blob.core.windows.net/container/blob[?query]: a query
// holding a SAS signature (sig=) is used as it is; otherwise the account's
// key or SAS token from `opts` or the environment (only when it names
// this account, or none).
http::remote_object locate_azure_url(const std::string& url, const azure_options& opts);

// hf://[datasets/|spaces/]ORG/NAME[@REVISION][/PATH]: locate_hub, in the
// Hub's own folder (stores/hub/hub_locator.hpp); its cache is a source
// decorator the dispatcher applies (stores/hub/hub_cache_source.hpp).

}  // namespace ringsafe::stores

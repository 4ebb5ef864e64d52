// Azure Blob objects: az://CONTAINER/BLOB (the account from azure_options or
// the environment) and https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB
// URLs; connection strings, SAS tokens, x-ms-version (the Shared Key signer:
// shared_key.hpp).
#pragma once

#include <string>
#include <string_view>

#include "http/range_fetch.hpp"
#include "http/url.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::stores {

// The x-ms-version sent when azure_options::api_version is empty.
inline constexpr std::string_view default_azure_api_version = "2025-01-05";

// Whom a credential belongs to: the account it names (lower case) and the
// blob endpoint's origin (scheme://host:port) it was given with; both empty
// when it names none.
struct azure_scope {
    std::string account;
    std::string origin;
    bool names_none() const { return account.empty() && origin.empty(); }
};

// The settings of an Azure Blob URL, each credential with the account it names.
struct azure_settings {
    azure_options options;  // every field that can be filled, filled
    azure_scope key_scope;  // whose options.key is
    azure_scope sas_scope;  // whose options.sas_token is
};

// `o` with each empty field filled: from its connection string (else
// $AZURE_STORAGE_CONNECTION_STRING: AccountName, AccountKey, BlobEndpoint,
// SharedAccessSignature, DefaultEndpointsProtocol, EndpointSuffix), then from
// $AZURE_STORAGE_ACCOUNT(_NAME), $AZURE_STORAGE_KEY / $AZURE_STORAGE_ACCOUNT_KEY,
// $AZURE_STORAGE_SAS_TOKEN; endpoint https://ACCOUNT.blob.SUFFIX when an
// account is known; api_version the default. Each credential is scoped where
// it came from: a field of `o` to o.account and o.endpoint, one of a
// connection string to its AccountName and BlobEndpoint, a variable to
// $AZURE_STORAGE_ACCOUNT(_NAME). Throws InvalidArgument naming `spec` (never
// a secret) for a malformed connection string or a credential holding CR, LF or NUL.
azure_settings resolve_azure_settings(const azure_options& o, const std::string& spec);

// Whether `host` is an Azure Blob service host (ACCOUNT.blob.core.windows.net,
// and the same under the Azure sovereign clouds' suffixes).
bool is_azure_blob_host(std::string_view host);

}  // namespace ringsafe::stores

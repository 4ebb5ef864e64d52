// What each object store adds to the transport's options (http.hpp): its
// credentials and endpoint (s3_options, gcs_options, azure_options,
// hub_options, all four in store_options), credentials from a store's
// environment, and S3 URLs presigned for any HTTP client. Defined in engine/stores.
#pragma once

#include <chrono>
#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe {

// S3 credentials and endpoint. Empty fields are taken from the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
// AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) when an s3:// URL is opened.
struct s3_options {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;      // temporary credentials (x-amz-security-token)
    std::string region;             // default "us-east-1"
    std::string endpoint;           // e.g. "http://127.0.0.1:7480"; default https://s3.<region>.amazonaws.com
    enum class addressing { automatic, path, virtual_host };
    addressing style = addressing::automatic;  // automatic: virtual host on AWS, path style on custom endpoints
};

// Google Cloud Storage, for gs://BUCKET/OBJECT URLs (engine/stores/README.md).
// Empty fields are taken from the environment when a gs:// URL is opened;
// credentials are looked for in this order, the first found is used:
// http_options::bearer_token; credentials_file; $RUNAI_STREAMER_GCS_CREDENTIAL_FILE;
// $GOOGLE_APPLICATION_CREDENTIALS; gcloud's application_default_credentials.json
// ($CLOUDSDK_CONFIG, else ~/.config/gcloud); the metadata server (on a Compute
// Engine VM, or when $GCE_METADATA_HOST names one); HMAC keys; else anonymous.
struct gcs_options {
    // XML API endpoint; default $STORAGE_EMULATOR_HOST, else $CLOUD_STORAGE_EMULATOR_ENDPOINT
    // (an emulator: its requests are anonymous unless credentials are given here or as
    // the bearer token), else https://storage.googleapis.com. "host:port" means http://.
    std::string endpoint;
    // A service-account key (JSON: an RS256 JWT exchanged at its token_uri) or an
    // authorized-user file (gcloud auth application-default login: a refresh token).
    std::string credentials_file;
    // HMAC key (requests signed with GOOG4-HMAC-SHA256); default $GS_ACCESS_KEY_ID and
    // $GS_SECRET_ACCESS_KEY (boto's and gsutil's names).
    std::string hmac_access_id;
    std::string hmac_secret;
    // Public buckets: no credentials at all; also $RUNAI_STREAMER_GCS_USE_ANONYMOUS_CREDENTIALS=1/true.
    bool anonymous = false;
};

// Azure Blob Storage, for az://CONTAINER/BLOB and https://ACCOUNT.blob.core.windows.net/
// URLs (engine/stores/README.md). Each empty field is filled when such a URL is opened:
// from connection_string (else $AZURE_STORAGE_CONNECTION_STRING), then from
// $AZURE_STORAGE_ACCOUNT / $AZURE_STORAGE_ACCOUNT_NAME, $AZURE_STORAGE_KEY /
// $AZURE_STORAGE_ACCOUNT_KEY and $AZURE_STORAGE_SAS_TOKEN. Requests are signed with
// Shared Key when a key is known, else carry the SAS token, else are anonymous; a
// URL's own SAS query (sig=...) is used as it is. A key or token goes only to the
// account it names (its connection string's AccountName or BlobEndpoint,
// $AZURE_STORAGE_ACCOUNT for the variables, `account`/`endpoint` for these fields);
// one naming none only to az:// URLs of these settings, never to an https URL.
struct azure_options {
    std::string account;            // storage account name
    std::string key;                // its Shared Key (base64, as the portal shows it)
    std::string sas_token;          // "sv=...&sig=..." (a leading '?' is dropped), appended as the query, never re-encoded
    std::string connection_string;  // AccountName=...;AccountKey=...;BlobEndpoint=...;SharedAccessSignature=...;...
    // Blob service URL, e.g. an emulator's path-style http://127.0.0.1:10000/devstoreaccount1;
    // default https://ACCOUNT.blob.<EndpointSuffix, default core.windows.net>.
    std::string endpoint;
    std::string api_version;        // x-ms-version sent with every request; default "2025-01-05"
    bool anonymous = false;         // public containers: neither Shared Key nor SAS
};

// Hugging Face Hub (hf:// URLs, engine/stores/README.md). Empty fields are taken from
// the environment when an hf:// URL is opened, as huggingface_hub reads it.
struct hub_options {
    std::string endpoint;   // HF_ENDPOINT, else https://huggingface.co
    // Sent as "Authorization: Bearer" to the endpoint's origin only (never to the CDN a
    // redirect leads to). Empty: http_options::bearer_token, else HF_TOKEN, else
    // HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH (default $HF_HOME/token); none
    // of those three with HF_HUB_DISABLE_IMPLICIT_TOKEN set.
    std::string token;
    // The Hub cache (models--ORG--NAME/{blobs,refs,snapshots}): HF_HUB_CACHE, else
    // HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub (HF_HOME: $XDG_CACHE_HOME/huggingface, else
    // ~/.cache/huggingface). A file there is read as a local file, with no request.
    std::string cache_dir;
    // Read the cache only; a file not there is an error naming it. Also set by
    // HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE (1, ON, YES, TRUE).
    bool offline = false;
    // Write the bytes read into the cache, in huggingface_hub's layout; a file is published
    // (atomically) only once every one of its bytes was read, never in part, and only when
    // they hash to its blob's name (whatever `verify` says).
    bool cache = false;
    // Checks of a file's bytes against the hash the Hub names it by (X-Linked-Etag: the
    // sha256 of an LFS file; else ETag: git's blob id), hashed as they land, with no
    // second pass. A mismatch is ObjectChanged naming both hashes.
    enum class verification {
        automatic,  // bytes fetched from the Hub, once every byte of the file was read; a cache hit is not hashed
        always,     // that, and a file found in the cache is hashed before it is used (`ringsafe verify`)
        never,      // fetched bytes are not checked (those written into the cache still are)
    };
    verification verify = verification::automatic;
};

// Every store's options, one member per store; open_url reads the one the URL's scheme picks.
struct store_options {
    s3_options s3;        // for s3:// URLs
    gcs_options gcs;      // for gs:// URLs
    azure_options azure;  // for az:// and https://ACCOUNT.blob.core.windows.net/ URLs
    hub_options hub;      // for hf:// URLs
};


// Fills credentials the environment provides for an http(s) `url` into `opts`
// when the caller gave none: the Hub's token (HF_TOKEN, HUGGING_FACE_HUB_TOKEN,
// the token file, unless HF_HUB_DISABLE_IMPLICIT_TOKEN; see hub_options::token)
// as the bearer token when the URL is at the Hub's origin (https://huggingface.co,
// hf.co and their subdomains on port 443, or HF_ENDPOINT's origin). The CLI
// calls it. hf:// URLs find their token themselves.
void apply_environment_credentials(const std::string& url, http_options& opts);

// Sets `endpoint` as the endpoint of every store that takes one (s3, gcs,
// azure, hub), so that it serves whichever the URL's scheme picks (the CLI's
// --endpoint-url, Python's endpoint_url=).
void set_store_endpoint(store_options& opts, const std::string& endpoint);

// Sends no credentials to gs:// and az:// objects (public buckets; the CLI's
// --anonymous, Python's anonymous=True).
void set_anonymous(store_options& opts);

// A presigned GET URL (SigV4 query signing) for `s3_url` (s3://bucket/key) that any
// HTTP client can fetch without credentials for `expires` (1 s to 7 days); `opts`
// is resolved as open_url resolves it (the AWS_* environment fills what is empty).
// Throws InvalidArgument naming the URL: not s3://, no access key, expiry out of range.
std::string presign_s3_url(const std::string& s3_url, const s3_options& opts, std::chrono::seconds expires);

}  // namespace ringsafe

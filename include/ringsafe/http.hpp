// HTTP(S), S3, GCS, Azure Blob and Hugging Face Hub objects as byte sources, read with
// parallel Range requests: the options of every remote source. open_url
// (open_source.hpp) opens one; stores.hpp fills these options from a store's
// environment and presigns S3 URLs.
//
//   auto src = ringsafe::open_url("https://host/model.safetensors");  // one request: size, ETag, header
//   src->execute(ops, ctl);   // ranges split into chunk_size requests over keep-alive connections
//
// Bodies land straight in the caller's buffers (no staging copy). Every
// response must be a 206 whose Content-Range is exactly the range asked;
// anything else is an error naming the URL and range, never a write outside
// the destination. Requests after the first carry If-Match / If-Range with the
// first response's ETag (or Last-Modified), so an object that changes while it
// is read is reported (errc::ObjectChanged), never mixed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ringsafe/source.hpp"

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

// Bounds and defaults of http_options::connections_per_origin, threads and chunk_size.
inline constexpr unsigned max_connections_per_origin = 256;
inline constexpr unsigned max_http_threads = 256;
inline constexpr unsigned default_connections_per_origin = 32;            // measured: see README, "Performance"
inline constexpr std::uint64_t min_http_chunk_size = 4u << 10;
inline constexpr std::uint64_t max_http_chunk_size = 1u << 30;
inline constexpr std::uint64_t default_http_chunk_size = 32u << 20;       // amortises a 50 ms first byte at 100 MB/s

// How remote objects are fetched. Defaults suit an object store (S3-like:
// 50-100 MB/s per connection, 20-50 ms to the first byte).
struct http_options {
    // Keep-alive connections per scheme://host:port, 1..max_connections_per_origin;
    // 0: the environment's RINGSAFE_CONNECTIONS, else default_connections_per_origin.
    unsigned connections_per_origin = 0;
    // Ranges are split into requests of at most this size, min_http_chunk_size..max_http_chunk_size;
    // 0: the environment's RINGSAFE_CHUNK (a size: 8M, 64M, 1G), else default_http_chunk_size.
    std::uint64_t chunk_size = 0;
    // Event loops of a blocking read (execute/read_exact), 1..max_http_threads: the calling
    // thread runs one, threads-1 threads started by the read (joined before it returns) run the
    // others, each with its share of the connections (a read of fewer requests than threads
    // uses fewer). 0: the environment's RINGSAFE_HTTP_THREADS, else the machine's hardware
    // threads; capped at connections_per_origin.
    // Asynchronous reads (engine/asio) run one loop on the caller's executor whatever this is.
    unsigned threads = 0;
    std::uint64_t prefetch = 256u << 10;       // size of the first, speculative Range request (size, ETag, header)
    std::string bearer_token;                  // "Authorization: Bearer ..."; dropped when a redirect changes origin
    std::vector<std::pair<std::string, std::string>> headers;  // extra request headers; all dropped when a redirect changes origin
    // Names (any case) of `headers` still sent after a redirect to another origin
    // (scheme, host or port); "Authorization" keeps the bearer token too. S3 signatures never follow.
    std::vector<std::string> cross_origin_headers;
    // Follow a redirect from https to http; false: refused with HttpError naming both URLs.
    // A Location of any other scheme (s3://, ftp://, file:, ...) is refused whatever this says.
    bool allow_https_downgrade = false;
    std::chrono::milliseconds connect_timeout{10'000};     // host-name resolution (HttpError past it), then TCP connect + TLS handshake
    std::chrono::milliseconds first_byte_timeout{30'000};  // request sent -> response header complete
    std::chrono::milliseconds stall_timeout{30'000};       // no body bytes for this long
    // Minimum transfer speed (curl's --speed-limit / --speed-time): a response body that
    // averages under low_speed_limit bytes/s over a low_speed_time window is abandoned and
    // resumed like a stalled one. 0 (either): no speed check.
    std::uint64_t low_speed_limit = 1024;
    std::chrono::milliseconds low_speed_time{30'000};
    unsigned max_attempts = 6;                 // tries per range without progress (a try that delivers bytes resets it)
    unsigned max_total_attempts = 20;          // failed tries per range in all, progress or not (resumptions included)
    std::chrono::milliseconds retry_base_delay{200};       // backoff: base * 2^(failures-1), with jitter
    std::chrono::milliseconds retry_max_delay{10'000};     // backoff cap (a longer Retry-After is honoured up to 60 s)
    unsigned max_redirects = 10;               // 301/302/303/307/308 to http(s) Locations followed per request
    bool verify_peer = true;                   // TLS certificate and host-name verification
    std::string ca_file;                       // extra CA bundle (PEM) trusted besides the system's; empty = system only
    s3_options s3;                             // for s3:// URLs
    gcs_options gcs;                           // for gs:// URLs
    azure_options azure;                       // for az:// and https://ACCOUNT.blob.core.windows.net/ URLs
    hub_options hub;                           // for hf:// URLs
};

// `o` with connections_per_origin, threads and chunk_size resolved (0 takes the
// environment variable, else the default; threads capped at the connections).
// Throws InvalidArgument naming the option or variable and its value when out
// of range or malformed.
http_options resolved_http_options(const http_options& o);

}  // namespace ringsafe

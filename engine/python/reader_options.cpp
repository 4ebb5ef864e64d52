// Reader()'s keyword options (and those of every call that opens a
// checkpoint): one table, each option's name beside what it sets in
// reader_options and the range it takes.
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "arguments.hpp"
#include "reader_object.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// The checks of arguments.hpp with "reader" as the owner their errors name.
std::uint64_t reader_uint(const py::handle& v, const std::string& key, std::uint64_t lo, std::uint64_t hi) {
    return option_uint(v, "reader", key, lo, hi);
}

unsigned reader_unsigned(const py::handle& v, const std::string& key, unsigned lo = 0) {
    return static_cast<unsigned>(reader_uint(v, key, lo, UINT32_MAX));
}

std::string reader_str(const py::handle& v, const std::string& key) { return option_str(v, "reader", key); }

bool reader_bool(const py::handle& v, const std::string& key) { return option_bool(v, "reader", key); }

// headers: a dict of str to str, each name and value checked as a str.
void set_headers(http_options& h, const py::handle& v) {
    if (!py::isinstance<py::dict>(v)) throw py::type_error("reader option headers must be a dict of str to str");
    for (auto [hk, hv] : v.cast<py::dict>())
        h.headers.emplace_back(reader_str(hk, "headers (a name)"),
                               reader_str(hv, "headers['" + reader_str(hk, "headers") + "']"));
}

// cross_origin_headers: a list of str (a str alone is refused, not read as its characters).
void set_cross_origin_headers(http_options& h, const py::handle& v) {
    if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v))
        throw py::type_error("reader option cross_origin_headers must be a list of str");
    for (auto name : v.cast<py::sequence>())
        h.cross_origin_headers.push_back(reader_str(name, "cross_origin_headers (a name)"));
}

// One option: its name and how its (not None) value goes into the options.
struct reader_option {
    std::string_view key;
    void (*set)(reader_options& o, const py::handle& v, const std::string& key);
};

// Every option Reader() takes, in reader_open_doc's order.
constexpr reader_option reader_option_table[] = {
    {"threads", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.file.threads = reader_unsigned(v, k);
     }},
    {"queue_depth", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.file.queue_depth = reader_unsigned(v, k);
     }},
    {"direct", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.file.direct = reader_bool(v, k);
     }},
    {"file_chunk", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.file.chunk_size = reader_uint(v, k, 0, UINT64_MAX >> 1);
     }},
    {"connections", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.connections_per_origin = static_cast<unsigned>(reader_uint(v, k, 1, max_connections_per_origin));
     }},
    {"http_threads", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.threads = static_cast<unsigned>(reader_uint(v, k, 1, max_http_threads));
     }},
    {"http_chunk", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.chunk_size = reader_uint(v, k, min_http_chunk_size, max_http_chunk_size);
     }},
    {"token", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.bearer_token = reader_str(v, k);
     }},
    {"headers", [](reader_options& o, const py::handle& v, const std::string&) { set_headers(o.source.http, v); }},
    {"cross_origin_headers", [](reader_options& o, const py::handle& v, const std::string&) {
         set_cross_origin_headers(o.source.http, v);
     }},
    {"allow_https_downgrade", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.allow_https_downgrade = reader_bool(v, k);
     }},
    {"ca_file", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.ca_file = reader_str(v, k);
     }},
    {"verify_tls", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.verify_peer = reader_bool(v, k);
     }},
    {"max_attempts", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.max_attempts = reader_unsigned(v, k);
     }},
    {"max_total_attempts", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.max_total_attempts = reader_unsigned(v, k);
     }},
    {"low_speed_limit", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.low_speed_limit = reader_uint(v, k, 0, UINT64_MAX >> 1);
     }},
    {"low_speed_time", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.http.low_speed_time = std::chrono::seconds(reader_uint(v, k, 1, 86400));
     }},
    {"s3_endpoint", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.s3.endpoint = reader_str(v, k);
     }},
    {"s3_region", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.s3.region = reader_str(v, k);
     }},
    {"endpoint_url", [](reader_options& o, const py::handle& v, const std::string& k) {
         set_store_endpoint(o.source.stores, reader_str(v, k));  // whichever store the URL names
     }},
    {"anonymous", [](reader_options& o, const py::handle& v, const std::string& k) {
         if (reader_bool(v, k)) set_anonymous(o.source.stores);
     }},
    {"gcs_credentials", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.gcs.credentials_file = reader_str(v, k);
     }},
    {"azure_account", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.azure.account = reader_str(v, k);
     }},
    {"azure_key", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.azure.key = reader_str(v, k);
     }},
    {"azure_sas_token", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.azure.sas_token = reader_str(v, k);
     }},
    {"azure_connection_string", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.azure.connection_string = reader_str(v, k);
     }},
    {"cache", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.hub.cache = reader_bool(v, k);
     }},
    {"cache_dir", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.hub.cache_dir = reader_str(v, k);
     }},
    {"local_files_only", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.hub.offline = reader_bool(v, k);
     }},
    {"verify", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.source.stores.hub.verify =
             reader_bool(v, k) ? hub_options::verification::always : hub_options::verification::never;
     }},
    {"max_header_size", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.parse.max_header_size = reader_uint(v, k, 0, UINT64_MAX >> 1);
     }},
    {"parallel_shards", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.parallel_shards = reader_unsigned(v, k);
     }},
    {"split_set", [](reader_options& o, const py::handle& v, const std::string& k) {
         o.gguf_split_set = reader_bool(v, k);
     }},
};

}  // namespace

const char* const reader_open_doc =
    "Opens `spec` (a path: str, bytes or os.PathLike; or a URL; reads and validates every header). "
    "Keyword options: threads, queue_depth, "
    "direct, file_chunk, connections, http_threads, http_chunk, token, headers, cross_origin_headers, "
    "allow_https_downgrade, ca_file, verify_tls, max_attempts, max_total_attempts, low_speed_limit, "
    "low_speed_time (seconds), s3_endpoint, s3_region, endpoint_url (s3://, gs://, az://, hf://: as "
    "HF_ENDPOINT), anonymous (gs://, az://), gcs_credentials (a service-account or authorized-user JSON "
    "file), azure_account, azure_key, azure_sas_token, azure_connection_string, cache (hf://: write what "
    "is read into the Hub cache), cache_dir (hf://), local_files_only (hf://: the cache alone, as "
    "HF_HUB_OFFLINE), verify (hf://: True also hashes a file found in the Hub cache against its blob's "
    "name, False skips the check of the bytes fetched against the Hub's sha256; left out, the fetched "
    "bytes are checked), max_header_size, parallel_shards, split_set (a part of a split GGUF set opens the "
    "whole set; False: the file named alone).";

reader_options make_options(const py::dict& kw) {
    reader_options o;
    for (auto [k, v] : kw) {
        std::string key = k.cast<std::string>();
        if (v.is_none()) continue;
        const reader_option* found = nullptr;
        for (const auto& option : reader_option_table)
            if (option.key == key) found = &option;
        if (!found) raise(errc::InvalidArgument, "unknown reader option '" + key + "'");
        found->set(o, v, key);
    }
    return o;
}

}  // namespace ringsafe::python

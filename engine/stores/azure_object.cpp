#include "stores/azure_object.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "http/ascii_case.hpp"
#include "http/environment.hpp"
#include "http/http_settings.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "stores/digest.hpp"
#include "stores/locate.hpp"
#include "stores/object_path.hpp"
#include "stores/shared_key.hpp"

namespace ringsafe::stores {
namespace {

using http::lower;
using http::trim;

// Fields of a connection string ("Name=value;..."), names lower-cased; a value keeps its '='.
std::map<std::string, std::string> connection_fields(std::string_view text, const std::string& spec) {
    std::map<std::string, std::string> f;
    while (!text.empty()) {
        const auto semi = text.find(';');
        const std::string_view part = text.substr(0, semi);
        text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
        if (trim(part).empty()) continue;
        const auto eq = part.find('=');
        if (eq == std::string_view::npos || trim(part.substr(0, eq)).empty())
            raise(errc::InvalidArgument, "the Azure storage connection string is malformed (a part is not Name=value), opening " + spec);
        f[lower(trim(part.substr(0, eq)))] = trim(part.substr(eq + 1));
    }
    return f;
}

// The account of an Azure Blob host: its first label.
std::string account_of_host(std::string_view host) { return std::string(host.substr(0, host.find('.'))); }

constexpr std::string_view blob_suffixes[] = {".blob.core.windows.net", ".blob.core.chinacloudapi.cn",
                                              ".blob.core.usgovcloudapi.net", ".blob.core.cloudapi.de"};

// A SAS token as the query it is appended as (never re-encoded).
std::string sas_query(std::string sas, const char* what, const std::string& spec) {
    if (!sas.empty() && sas.front() == '?') sas.erase(0, 1);
    for (char c : sas)
        if (static_cast<unsigned char>(c) <= 0x20 || c == '#' || static_cast<unsigned char>(c) >= 0x7f)
            raise(errc::InvalidArgument, std::string(what) + " holds a character a URL cannot carry (opening " + spec + ")");
    return sas;
}

// The origin of a blob endpoint as given ("" when it is none).
std::string endpoint_origin(const std::string& endpoint) {
    if (endpoint.empty()) return {};
    try {
        return http::parse_url(endpoint).origin();
    } catch (const error&) {
        return {};  // store_endpoint names it when it is used
    }
}

azure_scope scope_of(std::string_view account, const std::string& endpoint) {
    return {lower(account), endpoint_origin(endpoint)};
}

// Whether a credential of `scope` may go to `account` at `origin`: only when it
// names that account or that endpoint. `for_settings_account`: the URL is an
// az:// one, its account the settings' own, so a credential naming none goes too.
bool may_use(const azure_scope& scope, const std::string& account, const std::string& origin, bool for_settings_account) {
    if (scope.names_none()) return for_settings_account;
    return (!scope.account.empty() && scope.account == lower(account)) || (!scope.origin.empty() && scope.origin == origin);
}

// The remote object at `u` (an http(s) URL of a blob) for `account`, signed
// per `st` with the credentials that may go there.
http::remote_object blob_object(http::url u, const std::string& account, const azure_settings& st, bool url_has_sas,
                                bool for_settings_account, const std::string& spec) {
    const azure_options& o = st.options;
    http::remote_object obj;
    const std::string version = o.api_version;
    const std::string origin = u.origin();
    const bool use_key = !o.key.empty() && may_use(st.key_scope, account, origin, for_settings_account);
    const bool use_sas = !o.sas_token.empty() && may_use(st.sas_scope, account, origin, for_settings_account);
    std::string key;
    if (!o.anonymous && !url_has_sas && use_key) {
        if (account.empty()) raise(errc::InvalidArgument, "an Azure storage key is set but no account name, for " + spec);
        if (!from_base64(o.key, key))
            raise(errc::InvalidArgument, "the Azure storage key is not base64 (as the portal shows it), for " + spec);
        key = o.key;
    } else if (!o.anonymous && !url_has_sas && use_sas) {
        const std::string sas = sas_query(o.sas_token, "the Azure SAS token", spec);
        http::append_query(u, sas);
    }
    obj.requested = obj.location = u;
    obj.sign = [account, key, version](const http::url& target, std::string_view range,
                                       const http::header_fields& fields) {
        http::header_fields out{{"x-ms-version", version}};
        if (key.empty()) return out;
        out.emplace_back("x-ms-date", azure_date(std::time(nullptr)));
        http::header_fields all = fields;
        all.insert(all.end(), out.begin(), out.end());
        out.emplace_back("Authorization", azure_shared_key_authorization(account, key, azure_string_to_sign(target, account, range, all)));
        return out;
    };
    return obj;
}

}  // namespace

azure_settings resolve_azure_settings(const azure_options& given, const std::string& spec) {
    azure_settings st;
    azure_options& o = st.options;
    o = given;
    if (!o.key.empty()) st.key_scope = scope_of(given.account, given.endpoint);
    if (!o.sas_token.empty()) st.sas_scope = scope_of(given.account, given.endpoint);
    std::string conn = o.connection_string;
    http::fill_from_env(conn, {"AZURE_STORAGE_CONNECTION_STRING"});
    std::string protocol = "https", suffix = "core.windows.net";
    if (!conn.empty()) {
        auto f = connection_fields(conn, spec);
        // A connection string's credential belongs to its AccountName or its BlobEndpoint
        // (a SAS string from the portal names its account only there).
        const azure_scope own = scope_of(f["accountname"], f["blobendpoint"]);
        auto take = [&](std::string& field, const char* name, azure_scope* scope) {
            if (!field.empty() || f[name].empty()) return;
            field = f[name];
            if (scope) *scope = own;
        };
        take(o.account, "accountname", nullptr);
        take(o.key, "accountkey", &st.key_scope);
        take(o.sas_token, "sharedaccesssignature", &st.sas_scope);
        take(o.endpoint, "blobendpoint", nullptr);
        if (!f["defaultendpointsprotocol"].empty()) protocol = lower(f["defaultendpointsprotocol"]);
        if (!f["endpointsuffix"].empty()) suffix = f["endpointsuffix"];
        if (f.count("usedevelopmentstorage") && lower(f["usedevelopmentstorage"]) == "true")
            raise(errc::InvalidArgument, "UseDevelopmentStorage=true names no endpoint ringsafe can reach; give "
                                         "AccountName, AccountKey and BlobEndpoint instead (opening " + spec + ")");
    }
    // The variables' key and SAS token belong to the variables' account (none when unset).
    std::string env_account;
    http::fill_from_env(env_account, {"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME"});
    if (o.account.empty()) o.account = env_account;
    if (http::fill_from_env(o.key, {"AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY"})) st.key_scope = scope_of(env_account, "");
    if (http::fill_from_env(o.sas_token, {"AZURE_STORAGE_SAS_TOKEN"})) st.sas_scope = scope_of(env_account, "");
    if (o.api_version.empty()) o.api_version = std::string(default_azure_api_version);
    if (protocol != "http" && protocol != "https")
        raise(errc::InvalidArgument, "the connection string's DefaultEndpointsProtocol is neither http nor https (opening " + spec + ")");
    if (o.endpoint.empty() && !o.account.empty()) o.endpoint = protocol + "://" + o.account + ".blob." + suffix;
    http::check_field_value(o.account, "the Azure storage account", spec);
    http::check_field_value(o.api_version, "the Azure API version", spec);
    for (char c : o.account)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
            raise(errc::InvalidArgument, "the Azure storage account name '" + o.account + "' is not letters and digits (opening " + spec + ")");
    return st;
}

bool is_azure_blob_host(std::string_view host) {
    return std::any_of(std::begin(blob_suffixes), std::end(blob_suffixes), [&](std::string_view s) {
        return host.size() > s.size() && host.ends_with(s);
    });
}

http::remote_object locate_azure(const std::string& spec, const http_options&, const store_options& stores) {
    const object_path p = split_object_url(spec, "az");
    const azure_settings st = resolve_azure_settings(stores.azure, spec);
    const azure_options& o = st.options;
    if (o.endpoint.empty())
        raise(errc::InvalidArgument, "no Azure storage account for " + spec +
                                         ": set AZURE_STORAGE_ACCOUNT (or AZURE_STORAGE_CONNECTION_STRING, or azure_options)");
    const http::url u = object_url(store_endpoint(o.endpoint, "the Azure blob endpoint", spec), p);
    return blob_object(u, o.account.empty() ? account_of_host(u.host) : o.account, st, false, true, spec);
}

http::remote_object locate_azure_url(const std::string& spec, const azure_options& opts) {
    const http::url u = http::parse_url(spec);
    const azure_settings st = resolve_azure_settings(opts, spec);
    const auto params = http::query_parameters(http::split_target(u.target).query);
    const bool url_has_sas = std::any_of(params.begin(), params.end(),
                                         [](const http::query_parameter& p) { return p.name == "sig" && p.has_value; });
    // Only a credential naming this URL's account (or its endpoint) goes there.
    return blob_object(u, account_of_host(u.host), st, url_has_sas, false, spec);
}

}  // namespace ringsafe::stores

// Where the Hub is, who we are to it and where its cache lies: hub_options,
// its empty fields filled from the environment as huggingface_hub fills them
// (constants.py, utils/_auth.py). The one place that reads the HF_* variables.
#pragma once

#include <string>

#include "http/url.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::stores {

struct hub_settings {
    std::string endpoint;      // no trailing '/'
    std::string token;         // sent to the endpoint's origin only; empty: none
    std::string token_origin;  // where the token came from, for messages ("HF_TOKEN", "the token file /x", ...)
    std::string cache_dir;
    bool offline = false;
    bool write_cache = false;
    hub_options::verification verify = hub_options::verification::automatic;
};

// `hub` with every empty field filled: endpoint from HF_ENDPOINT (default
// https://huggingface.co); token from hub.token, else o.bearer_token, else
// implicit_hub_token(); the cache from HF_HUB_CACHE, else
// HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub; HF_HOME from HF_HOME, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface ("~/" expanded);
// offline when hub.offline or HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is
// 1, ON, YES or TRUE (any case). Throws InvalidArgument, naming where the
// token came from but never the token, when it holds a control character.
hub_settings hub_settings_of(const hub_options& hub, const http_options& o);

// The token huggingface_hub sends without being given one: none when
// HF_HUB_DISABLE_IMPLICIT_TOKEN is true, else the first set of HF_TOKEN and
// HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH ($HF_HOME/token), with
// spaces, CR and LF trimmed; `origin` set to the variable or file. Empty when
// there is none. Throws as check_hub_token does.
std::string implicit_hub_token(std::string* origin = nullptr);

// Throws InvalidArgument, naming `origin` (where it came from) but never the
// token, when `token` holds a control character.
void check_hub_token(const std::string& token, const std::string& origin);

// Whether `u` is at one of the Hub's origins, where its token may go: https on
// the default port of huggingface.co, hf.co or their subdomains, or the
// origin of HF_ENDPOINT (a mirror, a private Hub) exactly.
bool is_hub_origin(const http::url& u);

}  // namespace ringsafe::stores

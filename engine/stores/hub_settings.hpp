// Where the Hub is, who we are to it and where its cache lies: hub_options,
// its empty fields filled from the environment as huggingface_hub fills them
// (constants.py, utils/_auth.py). The one place that reads the HF_* variables.
#pragma once

#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe::stores {

struct hub_settings {
    std::string endpoint;      // no trailing '/'
    std::string token;         // sent to the endpoint's origin only; empty: none
    std::string token_origin;  // where the token came from, for messages ("HF_TOKEN", "the token file /x", ...)
    std::string cache_dir;
    bool offline = false;
    bool write_cache = false;
};

// `o.hub` with every empty field filled: endpoint from HF_ENDPOINT (default
// https://huggingface.co); token from o.hub.token, else o.bearer_token, else
// (unless HF_HUB_DISABLE_IMPLICIT_TOKEN) the first set of HF_TOKEN and
// HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH ($HF_HOME/token),
// with spaces, CR and LF trimmed; the cache from HF_HUB_CACHE, else
// HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub; HF_HOME from HF_HOME, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface ("~/" expanded);
// offline when o.hub.offline or HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is
// 1, ON, YES or TRUE (any case). Throws InvalidArgument, naming where the
// token came from but never the token, when it holds a control character.
hub_settings hub_settings_of(const http_options& o);

// Where the token of huggingface_hub is looked up from the environment alone
// (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, the token file), `origin` set to the
// variable or file; empty when there is none.
std::string environment_hub_token(std::string* origin = nullptr);

// Whether `host` is the Hub's: huggingface.co, hf.co, their subdomains, or
// the host of HF_ENDPOINT.
bool is_hub_host(const std::string& host);

}  // namespace ringsafe::stores

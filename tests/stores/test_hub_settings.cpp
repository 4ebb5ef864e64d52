// The Hub's settings from hub_options and the HF_* environment (internal:
// stores/hub/hub_settings.hpp), in huggingface_hub's order: the token from
// HF_TOKEN, HUGGING_FACE_HUB_TOKEN, then the token file; the cache from
// HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, ~; offline
// from HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE; the endpoint from HF_ENDPOINT.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "stores/hub/hub_settings.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::stores;
using namespace ringsafe::test;

namespace {

const char* const hub_vars[] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "HF_HUB_CACHE",
                                "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                "HF_ENDPOINT", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "HOME"};

// Every HF_* variable (and HOME) unset, then `set`; all restored afterwards.
class environment {
public:
    explicit environment(const std::map<std::string, std::string>& set) {
        for (const char* v : hub_vars) {
            if (const char* was = std::getenv(v)) saved_[v] = was;
            else saved_[v] = std::nullopt;
            ::unsetenv(v);
        }
        for (auto& [k, v] : set) ::setenv(k.c_str(), v.c_str(), 1);
    }
    ~environment() {
        for (auto& [k, v] : saved_)
            if (v) ::setenv(k.c_str(), v->c_str(), 1);
            else ::unsetenv(k.c_str());
    }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

hub_settings settings(const std::map<std::string, std::string>& env, const http_options& o = {},
                      const hub_options& hub = {}) {
    environment e(env);
    return hub_settings_of(hub, o);
}

hub_settings settings(const std::map<std::string, std::string>& env, const hub_options& hub) {
    return settings(env, http_options{}, hub);
}

}  // namespace

TEST_CASE("the token: HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then the token file, cleaned as huggingface_hub cleans it") {
    temp_dir tmp;
    write_file(tmp / "token", std::string("  hf_from_file \r\n"));
    std::filesystem::create_directories(tmp / "home");
    write_file(tmp / "home" / "token", std::string("hf_from_home\n"));
    const std::string file = (tmp / "token").string(), home = (tmp / "home").string();

    CHECK(settings({{"HF_TOKEN", "hf_a"}, {"HUGGING_FACE_HUB_TOKEN", "hf_b"}, {"HF_TOKEN_PATH", file}}).token == "hf_a");
    CHECK(settings({{"HF_TOKEN", "hf_a"}}).token_origin == "HF_TOKEN");
    CHECK(settings({{"HUGGING_FACE_HUB_TOKEN", "hf_b"}, {"HF_TOKEN_PATH", file}}).token == "hf_b");
    // An empty HF_TOKEN is not set (`HF_TOKEN or HUGGING_FACE_HUB_TOKEN`).
    CHECK(settings({{"HF_TOKEN", ""}, {"HUGGING_FACE_HUB_TOKEN", "hf_b"}}).token == "hf_b");
    // Spaces, CR and LF are trimmed; a token of spaces is none.
    CHECK(settings({{"HF_TOKEN", " hf_a\n"}}).token == "hf_a");
    CHECK(settings({{"HF_TOKEN", " \n"}, {"HF_TOKEN_PATH", file}}).token.empty());
    const hub_settings from_file = settings({{"HF_TOKEN_PATH", file}, {"HF_HOME", home}});
    CHECK(from_file.token == "hf_from_file");
    CHECK(from_file.token_origin == "the token file " + file);
    CHECK(settings({{"HF_HOME", home}}).token == "hf_from_home");  // $HF_HOME/token
    CHECK(settings({{"HF_HOME", (tmp / "nowhere").string()}}).token.empty());
    // HF_HUB_DISABLE_IMPLICIT_TOKEN: nothing from the environment; a token given is still sent.
    CHECK(settings({{"HF_TOKEN", "hf_a"}, {"HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"}}).token.empty());
    hub_options given;
    given.token = "hf_given";
    CHECK(settings({{"HF_TOKEN", "hf_a"}, {"HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"}}, given).token == "hf_given");
    // The options first: hub_options::token, then the bearer token (Python's token=).
    http_options bearer;
    bearer.bearer_token = "hf_bearer";
    const hub_settings b = settings({{"HF_TOKEN", "hf_a"}}, bearer);
    CHECK(b.token == "hf_bearer");
    CHECK(b.token_origin == "the bearer token option");
    hub_options hub;
    hub.token = "hf_hub";
    CHECK(settings({}, bearer, hub).token == "hf_hub");
}

TEST_CASE("a token holding a control character is refused without showing it") {
    http_options o;
    try {
        settings({{"HF_TOKEN", "hf_secret\x01value"}}, o);
        FAIL("accepted");
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidArgument);
        CHECK_THAT(e.what(), Catch::Contains("HF_TOKEN"));
        CHECK_THAT(e.what(), !Catch::Contains("hf_secret"));
        CHECK_THAT(e.what(), !Catch::Contains("value"));
    }
}

TEST_CASE("the cache folder: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME, ~/.cache") {
    CHECK(settings({{"HF_HUB_CACHE", "/c1"}, {"HUGGINGFACE_HUB_CACHE", "/c2"}, {"HF_HOME", "/h"}}).cache_dir == "/c1");
    CHECK(settings({{"HUGGINGFACE_HUB_CACHE", "/c2"}, {"HF_HOME", "/h"}}).cache_dir == "/c2");
    CHECK(settings({{"HF_HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}).cache_dir == "/h/hub");
    CHECK(settings({{"XDG_CACHE_HOME", "/x"}}).cache_dir == "/x/huggingface/hub");
    CHECK(settings({{"HOME", "/home/u"}}).cache_dir == "/home/u/.cache/huggingface/hub");
    CHECK(settings({{"HOME", "/home/u"}, {"HF_HOME", "~/hf"}}).cache_dir == "/home/u/hf/hub");
    CHECK(settings({{"HOME", "/home/u"}, {"HF_HUB_CACHE", "~/c"}}).cache_dir == "/home/u/c");
    hub_options o;
    o.cache_dir = "/opt";
    CHECK(settings({{"HF_HUB_CACHE", "/c1"}}, o).cache_dir == "/opt");
}

TEST_CASE("offline from HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE (1, ON, YES, TRUE in any case), or the option") {
    for (const char* v : {"1", "ON", "yes", "True"}) {
        INFO(v);
        CHECK(settings({{"HF_HUB_OFFLINE", v}}).offline);
        CHECK(settings({{"TRANSFORMERS_OFFLINE", v}}).offline);
    }
    for (const char* v : {"0", "false", "", "no"}) {
        INFO(v);
        CHECK_FALSE(settings({{"HF_HUB_OFFLINE", v}}).offline);
    }
    hub_options o;
    o.offline = true;
    CHECK(settings({}, o).offline);
}

TEST_CASE("the endpoint from the options, else HF_ENDPOINT, else huggingface.co; no trailing slash") {
    CHECK(settings({}).endpoint == "https://huggingface.co");
    CHECK(settings({{"HF_ENDPOINT", "http://127.0.0.1:9/"}}).endpoint == "http://127.0.0.1:9");
    hub_options o;
    o.endpoint = "https://mirror.example/hf";
    CHECK(settings({{"HF_ENDPOINT", "http://127.0.0.1:9"}}, o).endpoint == "https://mirror.example/hf");
}

TEST_CASE("the CLI's credentials for https:// Hub URLs come from the same lookup, the token file included") {
    temp_dir tmp;
    write_file(tmp / "token", std::string("hf_file\n"));
    environment e({{"HF_TOKEN_PATH", (tmp / "token").string()}, {"HF_ENDPOINT", "http://127.0.0.1:9"}});
    http_options hub;
    apply_environment_credentials("https://huggingface.co/org/m/resolve/main/model.safetensors", hub);
    CHECK(hub.bearer_token == "hf_file");
    http_options mirror;
    apply_environment_credentials("http://127.0.0.1:9/org/m/resolve/main/model.safetensors", mirror);
    CHECK(mirror.bearer_token == "hf_file");
    http_options other;
    apply_environment_credentials("https://example.com/model.safetensors", other);
    CHECK(other.bearer_token.empty());
    http_options hf;
    apply_environment_credentials("hf://org/m", hf);  // hf:// finds its own
    CHECK(hf.bearer_token.empty());
}

TEST_CASE("the implicit Hub token goes to the Hub's origins only: https on its port, or HF_ENDPOINT's own origin") {
    temp_dir tmp;
    write_file(tmp / "token", std::string("hf_file\n"));
    environment e({{"HF_TOKEN_PATH", (tmp / "token").string()}, {"HF_ENDPOINT", "http://127.0.0.1:9"}});
    auto token_for = [](const std::string& url) {
        http_options o;
        apply_environment_credentials(url, o);
        return o.bearer_token;
    };
    CHECK(token_for("https://huggingface.co/org/m/resolve/main/x") == "hf_file");
    CHECK(token_for("https://huggingface.co:443/org/m/resolve/main/x") == "hf_file");
    CHECK(token_for("http://127.0.0.1:9/org/m/resolve/main/x") == "hf_file");
    // Another scheme or port of the same host is another origin: a token sent
    // there in clear text, or to whatever listens on that port, leaks.
    CHECK(token_for("http://huggingface.co/org/m/resolve/main/x").empty());
    CHECK(token_for("https://huggingface.co:8443/org/m/resolve/main/x").empty());
    CHECK(token_for("http://127.0.0.1:10/org/m/resolve/main/x").empty());
    CHECK(token_for("https://127.0.0.1:9/org/m/resolve/main/x").empty());
}

TEST_CASE("the CLI's implicit Hub token follows huggingface_hub's rules: HF_HUB_DISABLE_IMPLICIT_TOKEN, no control characters") {
    {
        environment e({{"HF_TOKEN", "hf_env"}, {"HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"}});
        http_options o;
        apply_environment_credentials("https://huggingface.co/org/m/resolve/main/x", o);
        CHECK(o.bearer_token.empty());
    }
    {
        environment e(std::map<std::string, std::string>{{"HF_TOKEN", std::string("hf_\x01SECRET")}});
        http_options o;
        const std::string m = kind_of([&] { apply_environment_credentials("https://huggingface.co/org/m/resolve/main/x", o); });
        CHECK_THAT(m, Catch::Contains("InvalidArgument") && Catch::Contains("HF_TOKEN") && Catch::Contains("control character"));
        CHECK(m.find("SECRET") == std::string::npos);
    }
}

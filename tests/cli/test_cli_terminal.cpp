// Terminal-safe CLI output: tools/terminal_text's rule, and every command run on
// a checkpoint whose names, metadata and path hold what a terminal would act on
// (escape sequences, CR, BS, NUL, C1 and bidi controls, invalid UTF-8).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <filesystem>
#include <string>

#include "ringsafe/writer.hpp"
#include "terminal_text.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
using ringsafe::cli::terminal_text;
namespace fs = std::filesystem;

namespace {

using namespace std::string_literals;

// What a hostile checkpoint holds: a clear-screen, a title change, a CR that
// overwrites the line, BS, NUL, DEL, a C1 CSI (U+009B), a right-to-left override.
const std::string evil_name = "a\x1b[2J\x1b]0;pwned\x07\rfake\bname\0tail\x7f\xc2\x9b"s + "31m\xe2\x80\xae" "evil";
const std::string evil_key = "k\nnext line\ttab";
const std::string evil_value = "v\x1b[31mred\xe2\x81\xa6isolate\xd8\x9c";

// The first thing in `out` a terminal would act on or cannot show (a control
// other than the line ends, DEL, C1, a bidi control, invalid UTF-8), or "".
std::string first_unsafe(const std::string& out) {
    for (std::size_t i = 0; i < out.size();) {
        const auto b = static_cast<unsigned char>(out[i]);
        if (b < 0x80) {
            if ((b < 0x20 && b != '\n') || b == 0x7F) return "byte " + std::to_string(b) + " at " + std::to_string(i);
            ++i;
            continue;
        }
        std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
        if (n == 0 || i + n > out.size()) return "invalid UTF-8 at " + std::to_string(i);
        char32_t cp = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
        for (std::size_t k = 1; k < n; ++k) {
            const auto c = static_cast<unsigned char>(out[i + k]);
            if ((c & 0xC0) != 0x80) return "invalid UTF-8 at " + std::to_string(i);
            cp = (cp << 6) | (c & 0x3F);
        }
        if ((cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
            cp == 0x200E || cp == 0x200F || cp == 0x061C)
            return "U+" + std::to_string(static_cast<unsigned>(cp)) + " at " + std::to_string(i);
        i += n;
    }
    return "";
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

run_result run_cli(const std::string& args) { return run_command(cli_path() + " " + args + " 2>&1"); }

}  // namespace

TEST_CASE("terminal_text: controls, DEL, C1, bidi and invalid UTF-8 become visible escapes") {
    CHECK(terminal_text("plain name.weight") == "plain name.weight");
    CHECK(terminal_text("größe.日本語.🙂") == "größe.日本語.🙂");
    CHECK(terminal_text("\x1b[2J") == "\\e[2J");
    CHECK(terminal_text("a\rb\nc\td\be") == "a\\rb\\nc\\td\\be");
    CHECK(terminal_text("x\0y"s) == "x\\0y");  // a NUL neither truncates nor reaches the terminal
    CHECK(terminal_text("\x01\x07\x1f\x7f") == "\\x01\\x07\\x1f\\x7f");
    CHECK(terminal_text("back\\slash") == "back\\\\slash");  // unambiguous: "\e" in a name stays "\\e"
    CHECK(terminal_text("\xc2\x80\xc2\x9b\xc2\x9f\xc2\xa0") == "\\u0080\\u009b\\u009f\xc2\xa0");
    CHECK(terminal_text("\xe2\x80\xaa\xe2\x80\xae\xe2\x81\xa6\xe2\x81\xa9\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c") ==
          "\\u202a\\u202e\\u2066\\u2069\\u200e\\u200f\\u061c");
    CHECK(terminal_text("\xff\xfe") == "\\xff\\xfe");
    CHECK(terminal_text("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
    CHECK(terminal_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
    CHECK(terminal_text("\xe2\x80") == "\\xe2\\x80");           // truncated
    CHECK(terminal_text("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
    CHECK(first_unsafe(terminal_text(evil_name + evil_key + evil_value + "\xff")).empty());
}

TEST_CASE("terminal_text writes a URL's signing values as errors do") {
    CHECK(terminal_text("https://a.blob.core.windows.net/c/m.safetensors?sv=2022&sig=SECRET&sp=r") ==
          "https://a.blob.core.windows.net/c/m.safetensors?sv=2022&sig=...&sp=r");
    CHECK(terminal_text("s3 https://b.s3.amazonaws.com/m?X-Amz-Security-Token=T\x1b&X-Amz-Signature=S (403)") ==
          "s3 https://b.s3.amazonaws.com/m?X-Amz-Security-Token=...&X-Amz-Signature=... (403)");
}

TEST_CASE("every command prints hostile names, metadata and paths escaped; --json stays exact") {
    temp_dir d;
    const fs::path dir = d / "dir\x1b[1m\xff";  // a path that is not UTF-8, with an escape sequence
    fs::create_directories(dir);
    const fs::path src = dir / "m\r.safetensors";
    const auto bytes = pattern(8, 5);
    {
        writer w(src.string());
        w.add(evil_name, dtype::U8, {8}, bytes);
        w.add("plain", dtype::F32, {2}, pattern(8, 6));
        w.finish(metadata_map{{evil_key, evil_value}, {"format", "pt"}});
    }
    const fs::path out = dir / "out\b.safetensors";
    struct run {
        std::string what;
        std::string args;
        int status;
    };
    const std::vector<run> runs = {
        {"ls", "ls " + q(src), 0},
        {"verify", "verify " + q(src), 0},
        {"get", "get " + q(src) + " " + q(evil_name.substr(0, evil_name.find('\0'))) + " -o " + q(dir / "g"), 1},
        {"get everything", "get " + q(src) + " plain -o " + q(dir / "g\x1b"), 0},
        {"cp", "cp --no-sync " + q(src) + " " + q(out), 0},
        {"cp to nowhere", "cp --no-sync " + q(src) + " " + q(dir / "no\x1b" / "x.safetensors"), 1},
        {"load", "load " + q(src) + " --select 'a\x1b*'", 0},
        {"load missing", "load " + q(src) + " --select 'zz\x1b[0m'", 1},
        {"ls missing", "ls " + q(dir / "gone\x1b]0;t\x07"), 1},
        {"unknown command", "frob\x1b[2J", 2},
        {"bad option", "load " + q(src) + " --mode 'w\x1b'", 2},
    };
    for (auto& r : runs) {
        INFO(r.what);
        auto got = run_cli(r.args);
        CHECK(got.status == r.status);
        INFO(got.out);
        CHECK(first_unsafe(got.out) == "");
    }
    auto ls = run_cli("ls " + q(src));
    CHECK_THAT(ls.out, Catch::Contains(terminal_text(evil_name)));  // the whole name, past its NUL
    CHECK_THAT(ls.out, Catch::Contains("metadata " + terminal_text(evil_key) + " = " + terminal_text(evil_value)));
    CHECK_THAT(run_cli("cp --no-sync " + q(src) + " " + q(out)).out, Catch::Contains(terminal_text(out.string())));
    auto gone = run_cli("ls " + q(dir / "gone\x1b]0;t\x07"));
    CHECK_THAT(gone.out, Catch::Contains("gone\\e]0;t\\x07"));
    CHECK_THAT(gone.out, Catch::Contains("dir\\e[1m\\xff"));

    // --json is JSON-escaped, byte-exact after parsing: unchanged by the rule.
    auto js = run_command(cli_path() + " ls --json " + q(src));
    REQUIRE(js.status == 0);
    auto doc = boost::json::parse(js.out).as_object();
    CHECK(std::string(doc.at("tensors").as_array()[0].at("name").as_string()) == evil_name);
    CHECK(std::string(doc.at("metadata").at(evil_key).as_string()) == evil_value);
    CHECK(written_file(out).tensor(evil_name) == bytes);
}

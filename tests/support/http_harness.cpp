#include "http_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/json.hpp>

#include "hub_standin_secret.hpp"
#include "test_support.hpp"

extern char** environ;

namespace ringsafe::test {
namespace fs = std::filesystem;

bool have_program(const std::string& program) {
    return program.find('/') != std::string::npos ? ::access(program.c_str(), X_OK) == 0
                                                  : run_command("command -v " + program + " >/dev/null 2>&1").status == 0;
}

void require_program(const std::string& program) {
    if (!have_program(program)) {
        std::fprintf(stderr, "skipped: %s is not installed\n", program.c_str());
        std::exit(77);
    }
}

std::uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("free_port: bind failed");
    ::close(fd);
    return ntohs(a.sin_port);
}

void wait_for_port(std::uint16_t port) {
    for (int i = 0; i < 1000; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        if (ok) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("nothing listens on port " + std::to_string(port));
}

child_process::child_process(const std::vector<std::string>& argv, const fs::path& log, bool port_from_stdout) {
    int pipefd[2] = {-1, -1};
    if (port_from_stdout && ::pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (port_from_stdout) {
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    } else {
        posix_spawn_file_actions_adddup2(&fa, 2, 1);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = ::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
    if (port_from_stdout) {
        ::close(pipefd[1]);
        std::string line;
        char c;
        while (::read(pipefd[0], &c, 1) == 1 && c != '\n') line += c;
        ::close(pipefd[0]);
        if (line.rfind("PORT ", 0) != 0) throw std::runtime_error(argv[0] + " did not report its port");
        port_ = static_cast<std::uint16_t>(std::stoi(line.substr(5)));
    }
}

child_process& child_process::operator=(child_process&& o) noexcept {
    if (this != &o) {
        stop();
        pid_ = o.pid_, port_ = o.port_;
        o.pid_ = -1;
    }
    return *this;
}

void child_process::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

child_process::~child_process() { stop(); }

void make_world_readable(const fs::path& p) {
    for (fs::path d = fs::absolute(p); d != d.root_path(); d = d.parent_path())
        if (fs::is_directory(d))
            fs::permissions(d, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
    if (fs::is_directory(p)) {
        for (auto& e : fs::recursive_directory_iterator(p))
            fs::permissions(e.path(), fs::perms::others_read | (e.is_directory() ? fs::perms::others_exec : fs::perms::none),
                            fs::perm_options::add);
        fs::permissions(p, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
    }
}

namespace {

// The launcher's path: $RINGSAFE_SERVER_LAUNCHER, else the source tree's (compiled in).
std::string server_launcher_path() {
    if (const char* p = std::getenv("RINGSAFE_SERVER_LAUNCHER"); p && *p) return p;
    return RINGSAFE_SERVER_LAUNCHER_PATH;
}

// The Python that runs it: the one meson ran with (compiled in; no pyenv shim to start),
// else python3 from PATH (exits 77 when there is none).
std::string server_launcher_python() {
    if (::access(RINGSAFE_SERVER_LAUNCHER_PYTHON, X_OK) == 0) return RINGSAFE_SERVER_LAUNCHER_PYTHON;
    require_program("python3");
    return "python3";
}

// One line from `fd` (EINTR retried: the signal tests start servers too); false at EOF first.
bool read_line(int fd, std::string& line) {
    for (char c;;) {
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        if (c == '\n') return true;
        line += c;
    }
}

// waitpid with EINTR retried; the exit status, or -1 when it did not exit normally.
int wait_exit_status(pid_t pid) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

launched_servers::launched_servers(const std::string& kind, const std::vector<std::string>& args) {
    std::vector<std::string> argv{server_launcher_python(), server_launcher_path(), kind};
    argv.insert(argv.end(), args.begin(), args.end());
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]), ::close(in[1]);
        throw std::runtime_error("pipe failed");
    }
    // Only the launcher gets these ends (dup2 clears close-on-exec): another child must not
    // hold its stdin open, or closing ours would not stop it.
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
    cargs.push_back(nullptr);
    const int rc = ::posix_spawnp(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
        ::close(in[1]), ::close(out[0]);
        pid_ = -1;
        throw std::runtime_error("cannot start " + argv[1]);
    }
    stdin_ = in[1];
    std::string line;
    const bool got = read_line(out[0], line);
    ::close(out[0]);
    if (!got) {  // it ended without starting anything: its stderr said why
        ::close(stdin_);
        stdin_ = -1;
        const int status = wait_exit_status(pid_);
        pid_ = -1;
        if (status == 77) std::exit(77);
        throw std::runtime_error("server_launcher.py " + kind + " failed (status " + std::to_string(status) + ")");
    }
    const boost::json::value described = boost::json::parse(line);
    for (auto& [k, v] : described.as_object()) {
        if (v.is_string()) fields_[k] = std::string(v.as_string());
        else if (v.is_int64()) fields_[k] = std::to_string(v.as_int64());
    }
}

std::string launched_servers::field(const std::string& name) const {
    auto it = fields_.find(name);
    return it == fields_.end() ? std::string() : it->second;
}

launched_servers::launched_servers(launched_servers&& o) noexcept
    : pid_(o.pid_), stdin_(o.stdin_), fields_(std::move(o.fields_)) {
    o.pid_ = -1, o.stdin_ = -1;
}

launched_servers& launched_servers::operator=(launched_servers&& o) noexcept {
    if (this != &o) {
        stop();
        pid_ = o.pid_, stdin_ = o.stdin_, fields_ = std::move(o.fields_);
        o.pid_ = -1, o.stdin_ = -1;
    }
    return *this;
}

void launched_servers::stop() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    // It stops its servers (SIGTERM, SIGKILL after a grace) before it exits: Ceph's three take longest.
    for (int i = 0; i < 9000; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    wait_exit_status(pid_);
    pid_ = -1;
}

launched_servers::~launched_servers() { stop(); }

test_ca make_test_ca(const fs::path& dir) {
    fs::create_directories(dir);
    launched_servers made("ca", {"--dir=" + fs::absolute(dir).string()});
    test_ca ca{made.field("ca_cert"), made.field("server_cert"), made.field("server_key")};
    make_world_readable(dir);
    return ca;
}

nginx_server::nginx_server(const fs::path& prefix, nginx_config cfg) : prefix_(prefix), tls_(cfg.tls != nullptr) {
    std::vector<std::string> args{"--prefix=" + fs::absolute(prefix).string(), "--root=" + fs::absolute(cfg.root).string(),
                                  "--log-format=$connection $connection_requests $status $request_uri $body_bytes_sent",
                                  "--workers=" + std::to_string(cfg.workers), "--server-body=" + cfg.server_body,
                                  "--http-extra=" + cfg.http_extra};
    if (cfg.port) args.push_back("--port=" + std::to_string(cfg.port));
    if (tls_) {
        args.push_back("--tls-cert=" + cfg.tls->server_cert.string());
        args.push_back("--tls-key=" + cfg.tls->server_key.string());
        args.push_back("--no-http");
    }
    proc_ = launched_servers("nginx", args);
    port_ = static_cast<std::uint16_t>(std::stoi(proc_.field(tls_ ? "tls_port" : "port")));
}

std::string nginx_server::base_url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> nginx_server::access_log(std::size_t at_least) const {
    auto read = [this] {
        std::vector<std::string> lines;
        std::ifstream in(prefix_ / "logs" / "access.log");
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        return lines;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto lines = read();
    while (lines.size() < at_least && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        lines = read();
    }
    for (;;) {  // settled: nothing new for 50 ms
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        auto again = read();
        if (again.size() == lines.size()) return again;
        lines = std::move(again);
    }
}

std::size_t nginx_server::connections_logged() const {
    std::set<std::string> ids;
    for (auto& l : access_log()) ids.insert(l.substr(0, l.find(' ')));
    return ids.size();
}

fault_server::fault_server(const fs::path& log_dir) {
    const char* exe = std::getenv("RINGSAFE_FAULT_SERVER");
    if (!exe) throw std::runtime_error("RINGSAFE_FAULT_SERVER is not set");
    fs::create_directories(log_dir);
    proc_ = child_process({exe}, log_dir / "fault_server.log", true);
    wait_for_port(proc_.port());
}

namespace {

// The body of GET `target` from 127.0.0.1:port (HTTP/1.1, Connection: close).
std::string http_get(std::uint16_t port, const std::string& target) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot connect to port " + std::to_string(port));
    }
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
        ::close(fd);
        throw std::runtime_error("cannot send to port " + std::to_string(port));
    }
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    const auto body = out.find("\r\n\r\n");
    return body == std::string::npos ? std::string() : out.substr(body + 4);
}

}  // namespace

hub_standin::hub_standin(const fs::path& dir) : root_(fs::absolute(dir / "repos")) {
    const char* exe = std::getenv("RINGSAFE_HUB_STANDIN");
    if (!exe) throw std::runtime_error("RINGSAFE_HUB_STANDIN is not set");
    fs::create_directories(root_);
    // The CDN also listens on 127.0.0.2 (same port): another host a Location may name.
    const std::uint16_t port = free_port();
    cdn_ = std::make_unique<nginx_server>(
        dir / "cdn",
        nginx_config{root_, "    listen 127.0.0.2:" + std::to_string(port) + ";\n" + hub_cdn_location(), "", nullptr, 1, port});
    proc_ = child_process({exe, root_.string(), cdn_->base_url()}, dir / "hub_standin.log", true);
    wait_for_port(proc_.port());
}

std::string hub_standin::add_repo(const std::string& repo, const std::map<std::string, std::vector<std::byte>>& files,
                                  const std::string& branch, std::string commit) {
    static std::uint64_t made = 0;
    if (commit.empty()) {
        const std::string seed = repo + "#" + std::to_string(++made) + "#" + std::to_string(::getpid());
        commit = sha256_hex(std::as_bytes(std::span(seed.data(), seed.size()))).substr(0, 40);
    }
    const fs::path base = root_ / (repo.starts_with("datasets/") || repo.starts_with("spaces/") ? repo : "models/" + repo);
    for (auto& [name, bytes] : files) {
        fs::create_directories((base / "commits" / commit / name).parent_path());
        write_file(base / "commits" / commit / name, bytes);
    }
    if (!branch.empty()) {
        fs::create_directories((base / "refs" / branch).parent_path());
        write_file(base / "refs" / branch, commit);
    }
    make_world_readable(root_);
    return commit;
}

fs::path hub_standin::file_of(const std::string& repo, const std::string& commit, const std::string& path) const {
    return root_ / (repo.starts_with("datasets/") || repo.starts_with("spaces/") ? repo : "models/" + repo) / "commits" /
           commit / path;
}

void hub_standin::control(const std::string& repo, const std::string& name, const std::string& text) {
    const fs::path base = root_ / (repo.starts_with("datasets/") || repo.starts_with("spaces/") ? repo : "models/" + repo);
    fs::create_directories(base);
    write_file(base / name, text);
}

std::vector<std::string> hub_standin::requests() const {
    std::vector<std::string> out;
    const auto v = boost::json::parse(http_get(proc_.port(), "/_standin/stats"));
    for (auto& line : v.at("log").as_array()) out.emplace_back(line.as_string());
    return out;
}

std::size_t hub_standin::cdn_auth_refused() const {
    std::size_t n = 0;
    for (auto& l : cdn_->access_log()) n += l.find(" 400 ") != std::string::npos;
    return n;
}

}  // namespace ringsafe::test

#include "http_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/json.hpp>

#include "hub_standin_secret.hpp"
#include "test_support.hpp"

extern char** environ;

namespace ringsafe::test {
namespace fs = std::filesystem;

void require_program(const std::string& program) {
    bool found = program.find('/') != std::string::npos
                     ? ::access(program.c_str(), X_OK) == 0
                     : run_command("command -v " + program + " >/dev/null 2>&1").status == 0;
    if (!found) {
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

test_ca make_test_ca(const fs::path& dir) {
    require_program("openssl");
    fs::create_directories(dir);
    test_ca ca{dir / "ca.crt", dir / "server.crt", dir / "server.key"};
    const std::string d = dir.string();
    std::string cmd =
        "cd '" + d + "' && ( "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=ringsafe test CA' "
        "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign && "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=127.0.0.1' && "
        "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > ext.cnf && "
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext.cnf"
        " ) >/dev/null 2>&1";
    if (run_command(cmd).status != 0) throw std::runtime_error("openssl could not make the test CA in " + d);
    make_world_readable(dir);
    return ca;
}

nginx_server::nginx_server(const fs::path& prefix, nginx_config cfg) : prefix_(prefix), tls_(cfg.tls != nullptr) {
    require_program("nginx");
    fs::create_directories(prefix / "logs");
    fs::create_directories(prefix / "tmp");
    make_world_readable(cfg.root);
    port_ = cfg.port ? cfg.port : free_port();
    const std::string p = fs::absolute(prefix).string();
    std::ostringstream c;
    c << "worker_processes " << cfg.workers << ";\n"
      << "pid " << p << "/nginx.pid;\nerror_log " << p << "/logs/error.log;\n"
      << "events { worker_connections 512; }\n"
      << "http {\n"
      << "  client_body_temp_path " << p << "/tmp/body;\n  proxy_temp_path " << p << "/tmp/proxy;\n"
      << "  fastcgi_temp_path " << p << "/tmp/fastcgi;\n  uwsgi_temp_path " << p << "/tmp/uwsgi;\n"
      << "  scgi_temp_path " << p << "/tmp/scgi;\n"
      << "  log_format rs '$connection $connection_requests $status $request_uri $body_bytes_sent';\n"
      << "  access_log " << p << "/logs/access.log rs;\n"
      << "  default_type application/octet-stream;\n  sendfile on;\n  tcp_nopush on;\n"
      << "  keepalive_requests 100000;\n  keepalive_timeout 60s;\n"
      << "  server {\n    listen 127.0.0.1:" << port_ << (tls_ ? " ssl" : "") << ";\n"
      << "    root " << fs::absolute(cfg.root).string() << ";\n";
    if (tls_)
        c << "    ssl_certificate " << cfg.tls->server_cert.string() << ";\n    ssl_certificate_key "
          << cfg.tls->server_key.string() << ";\n    ssl_protocols TLSv1.2 TLSv1.3;\n";
    c << cfg.server_body << "\n  }\n" << cfg.http_extra << "\n}\n";
    std::ofstream(prefix / "nginx.conf") << c.str();
    proc_ = child_process({"nginx", "-p", p, "-c", p + "/nginx.conf", "-g", "daemon off;"}, prefix / "logs" / "stderr.log");
    wait_for_port(port_);
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

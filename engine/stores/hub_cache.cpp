// The Hub's local cache (hub_cache.hpp): lookups, and files written into it
// as they are read, published as the streaming writer publishes its files
// (engine/publish).
#include "stores/hub_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "file/temp_file.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::stores {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view hub_cachedir_tag =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by ringsafe (the Hugging Face Hub cache).\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n";

// The commit refs/REVISION holds (surrounding whitespace dropped), if it is one.
std::string read_hub_ref(const fs::path& ref) {
    std::ifstream in(ref, std::ios::binary);
    if (!in) return {};
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
    return is_commit_hash(s) ? s : std::string();
}

// The commit `p`'s revision names in the repo's cache folder; empty when unknown.
std::string hub_cached_commit(const fs::path& repo, const hub_path& p) {
    const std::string& rev = p.revision_or_main();
    return is_commit_hash(rev) ? rev : read_hub_ref(repo / "refs" / rev);
}

void make_hub_dirs(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) raise_errno(ec.value(), "creating the Hub cache folder '" + dir.string() + "'", dir.string());
}

std::mutex hub_registry_mutex;
std::map<std::string, std::weak_ptr<hub_cache_entry>> hub_registry;  // the entries being written, by blob/commit/file

}  // namespace

std::optional<cached_file> find_in_hub_cache(const std::string& cache_dir, const hub_path& p) {
    const fs::path repo = fs::path(cache_dir) / hub_repo_folder(p);
    const std::string commit = hub_cached_commit(repo, p);
    if (commit.empty()) return std::nullopt;
    const fs::path snapshot = repo / "snapshots" / commit;
    auto look = [&](std::string_view file) -> std::optional<cached_file> {
        const fs::path f = snapshot / std::string(file);
        std::error_code ec;
        if (!fs::is_regular_file(f, ec)) return std::nullopt;
        return cached_file{f.string(), commit, std::string(file)};
    };
    if (!p.path.empty()) return look(p.path);
    if (auto index = look(hub_index_file)) return index;
    return look(hub_single_file);
}

std::string hub_cache_place(const std::string& cache_dir, const hub_path& p) {
    const fs::path repo = fs::path(cache_dir) / hub_repo_folder(p);
    const std::string commit = hub_cached_commit(repo, p);
    if (commit.empty()) return (repo / "refs" / p.revision_or_main()).string();
    const fs::path snapshot = repo / "snapshots" / commit;
    if (!p.path.empty()) return (snapshot / p.path).string();
    return (snapshot / std::string(hub_index_file)).string() + " or " + std::string(hub_single_file);
}

void link_hub_snapshot(const std::string& repo_dir, const std::string& file, const std::string& revision,
                       const std::string& commit, const std::string& blob) {
    const fs::path repo(repo_dir);
    const fs::path pointer = repo / "snapshots" / commit / file;
    make_hub_dirs(pointer.parent_path());
    std::error_code ec;
    if (!fs::is_symlink(pointer, ec) && !fs::exists(pointer, ec)) {
        // snapshots/COMMIT/a/b -> ../../../blobs/BLOB: one "../" per folder up to the repo's.
        std::string target;
        for (std::size_t n = 2 + static_cast<std::size_t>(std::count(file.begin(), file.end(), '/')); n > 0; --n)
            target += "../";
        target += "blobs/" + blob;
        file::replace_with_symlink(pointer.string(), target);
    }
    if (!revision.empty() && revision != commit) {
        const fs::path ref = repo / "refs" / revision;
        if (read_hub_ref(ref) != commit) {
            make_hub_dirs(ref.parent_path());
            file::replace_file(ref.string(), commit);
        }
    }
    const fs::path tag = repo.parent_path() / "CACHEDIR.TAG";
    if (!fs::exists(tag, ec)) {
        try {
            file::replace_file(tag.string(), hub_cachedir_tag);
        } catch (const error&) {  // best effort, as huggingface_hub's
        }
    }
}

std::shared_ptr<hub_cache_entry> hub_cache_entry::open(const std::string& cache_dir, const hub_path& p,
                                                       const std::string& file, const std::string& revision,
                                                       const std::string& commit, const std::string& blob,
                                                       std::uint64_t size) {
    const std::string repo_dir = (fs::path(cache_dir) / hub_repo_folder(p)).string();
    const fs::path pointer = fs::path(repo_dir) / "snapshots" / commit / file;
    const fs::path blob_path = fs::path(repo_dir) / "blobs" / blob;
    std::error_code ec;
    if (fs::is_regular_file(pointer, ec) ||
        (fs::is_regular_file(blob_path, ec) && fs::file_size(blob_path, ec) == size)) {
        link_hub_snapshot(repo_dir, file, revision, commit, blob);
        return nullptr;
    }
    const std::string key = blob_path.string() + '\n' + commit + '\n' + file;
    std::lock_guard lock(hub_registry_mutex);
    if (auto e = hub_registry[key].lock()) return e;
    auto e = std::make_shared<hub_cache_entry>(repo_dir, file, revision, commit, blob, size);
    hub_registry[key] = e;
    if (size == 0) e->write(0, {});
    return e;
}

hub_cache_entry::hub_cache_entry(std::string repo_dir, std::string file, std::string revision, std::string commit,
                                 std::string blob, std::uint64_t size)
    : repo_dir_(std::move(repo_dir)), file_(std::move(file)), revision_(std::move(revision)),
      commit_(std::move(commit)), blob_name_(std::move(blob)), size_(size) {
    blob_ = (fs::path(repo_dir_) / "blobs" / blob_name_).string();
    make_hub_dirs(fs::path(blob_).parent_path());
    tmp_ = std::make_unique<file::temp_file>(blob_, false);
}

hub_cache_entry::~hub_cache_entry() {
    tmp_.reset();  // an unpublished temporary is removed (O_TMPFILE: it never had a name)
    std::lock_guard lock(hub_registry_mutex);
    for (auto it = hub_registry.begin(); it != hub_registry.end();)
        it = it->second.expired() ? hub_registry.erase(it) : std::next(it);
}

bool hub_cache_entry::published() const {
    std::shared_lock lock(mutex_);
    return published_;
}

void hub_cache_entry::write(std::uint64_t offset, std::span<const std::byte> bytes) {
    if (offset >= size_ && size_ > 0) return;
    const std::uint64_t len = std::min<std::uint64_t>(bytes.size(), size_ - std::min(offset, size_));
    {
        // Shared: writers of the entry pwrite at once; the publish (exclusive)
        // closes the descriptor only once none of them is using it.
        std::shared_lock writing(mutex_);
        if (published_) return;
        for (std::uint64_t done = 0; done < len;) {
            const ssize_t n = ::pwrite(tmp_->fd(), bytes.data() + done, static_cast<std::size_t>(len - done),
                                       static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) raise_errno(n < 0 ? errno : EIO, "writing the Hub cache file '" + blob_ + "'", blob_);
            done += static_cast<std::uint64_t>(n);
        }
    }
    std::unique_lock lock(mutex_);
    if (published_) return;
    if (len > 0) {  // merge [offset, offset + len) into the landed ranges
        std::uint64_t first = offset, end = offset + len;
        auto it = have_.upper_bound(first);
        if (it != have_.begin() && std::prev(it)->second >= first) --it;
        while (it != have_.end() && it->first <= end) {
            first = std::min(first, it->first);
            end = std::max(end, it->second);
            it = have_.erase(it);
        }
        have_.emplace(first, end);
    }
    const bool whole = size_ == 0 || (have_.size() == 1 && have_.begin()->first == 0 && have_.begin()->second == size_);
    if (whole) publish_locked();
}

hub_cache_tee::hub_cache_tee(std::shared_ptr<hub_cache_entry> entry, std::span<const read_op> ops)
    : entry_(std::move(entry)), ops_(ops), landed_(new std::atomic<std::uint64_t>[ops.size()]), written_(ops.size(), 0) {
    for (std::size_t i = 0; i < ops.size(); ++i) landed_[i].store(0, std::memory_order_relaxed);
    thread_ = std::thread([this] { run(); });
}

hub_cache_tee::~hub_cache_tee() {
    {
        std::lock_guard lock(mutex_);
        abandoned_ = true;
        ready_.clear();
    }
    stop();
}

void hub_cache_tee::landed(std::size_t op, std::uint64_t bytes) {
    if (landed_[op].fetch_add(bytes, std::memory_order_acq_rel) + bytes != ops_[op].length) return;
    std::lock_guard lock(mutex_);
    ready_.push_back(op);
    wake_.notify_one();
}

void hub_cache_tee::run() {
    for (;;) {
        std::size_t op;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
            if (ready_.empty() || abandoned_) return;
            op = ready_.front();
            ready_.pop_front();
            if (failed_) continue;
        }
        try {
            entry_->write(ops_[op].offset, {ops_[op].dst, static_cast<std::size_t>(ops_[op].length)});
            written_[op] = 1;
        } catch (...) {
            std::lock_guard lock(mutex_);
            failed_ = std::current_exception();
        }
    }
}

void hub_cache_tee::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void hub_cache_tee::finish() {
    stop();  // the thread drains what is ready, then joins
    if (failed_) std::rethrow_exception(failed_);
    for (std::size_t i = 0; i < ops_.size(); ++i)
        if (!written_[i]) entry_->write(ops_[i].offset, {ops_[i].dst, static_cast<std::size_t>(ops_[i].length)});
}

void hub_cache_entry::publish_locked() {
    tmp_->publish(true, true);
    published_ = true;
    link_hub_snapshot(repo_dir_, file_, revision_, commit_, blob_name_);
}

}  // namespace ringsafe::stores

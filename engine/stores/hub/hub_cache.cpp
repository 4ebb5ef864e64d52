// The Hub's local cache (hub_cache.hpp): lookups, and files written into it
// as they are read, published as the streaming writer publishes its files
// (engine/publish).
#include "stores/hub/hub_cache.hpp"

#include <limits.h>
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

// Throws ENAMETOOLONG naming `path` when a name on it, or the temporary
// published at it by rename (".NAME.ringsafe-XXXXXX"), is longer than the
// file system under `cache_dir` takes, or the whole is over PATH_MAX.
void check_hub_path(const fs::path& path, const std::string& cache_dir) {
    fs::path probe = cache_dir;
    std::error_code ec;
    while (!probe.empty() && !fs::exists(probe, ec)) probe = probe.parent_path();
    long name_max = probe.empty() ? -1 : ::pathconf(probe.c_str(), _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    const std::size_t temp_suffix = std::string_view(".ringsafe-XXXXXX").size() + 1;
    const std::string last = path.filename().string();
    bool too_long = path.native().size() + temp_suffix >= PATH_MAX || last.size() + temp_suffix > static_cast<std::size_t>(name_max);
    for (const fs::path& part : path) too_long = too_long || part.native().size() > static_cast<std::size_t>(name_max);
    if (too_long)
        raise_errno(ENAMETOOLONG, "cannot write the Hub cache: the path '" + path.string() +
                                      "' is too long for its file system (names of at most " + std::to_string(name_max) +
                                      " bytes, temporaries included)", path.string());
}

// Whether the regular file `blob_path` is `size` bytes that hash to `name`.
bool holds_blob(const fs::path& blob_path, const std::string& name, std::uint64_t size) {
    std::error_code ec;
    if (fs::file_size(blob_path, ec) != size || ec) return false;
    try {
        return hash_blob_file(blob_path.string(), blob_hash_of(name)) == name;
    } catch (const error&) {
        return false;
    }
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
        const fs::file_status st = fs::symlink_status(f, ec);
        if (fs::is_symlink(st)) {
            // Where the link leads, every link on the way resolved: a regular file directly in blobs/.
            const fs::path target = fs::canonical(f, ec);
            if (ec || target.parent_path() != fs::canonical(repo / "blobs", ec) || ec ||
                !fs::is_regular_file(fs::symlink_status(target, ec)))
                return std::nullopt;
            return cached_file{f.string(), commit, std::string(file), target.string(), target.filename().string()};
        }
        if (!fs::is_regular_file(st)) return std::nullopt;
        // A file copied in (a cache without symlinks): it must lie in the snapshot, not behind a linked folder.
        const fs::path real = fs::canonical(f, ec);
        const fs::path base = fs::canonical(repo / "snapshots", ec);
        if (ec || fs::relative(real, base).native().starts_with("..")) return std::nullopt;
        return cached_file{f.string(), commit, std::string(file), {}, {}};
    };
    if (!p.path.empty()) return look(p.path);
    if (auto index = look(hub_index_file)) return index;
    return look(hub_single_file);
}

void verify_cached_file(const cached_file& f, const std::string& url) {
    const blob_hash kind = blob_hash_of(f.blob_name);
    if (f.blob.empty() || kind == blob_hash::none)
        raise(errc::InvalidArgument, url + ": the Hub cache's file " + f.local +
                                         (f.blob.empty() ? " links to no blob" : " links to the blob '" + f.blob_name + "', no hash") +
                                         ": it cannot be checked (remove it to fetch the file again)");
    const std::string got = hash_blob_file(f.blob, kind);
    if (got != f.blob_name)
        raise(errc::ObjectChanged, url + ": the Hub cache's blob " + f.blob + " holds bytes whose " +
                                       std::string(blob_hash_name(kind)) + " is " + got + ", not its name " +
                                       f.blob_name + ": remove it and the link " + f.local + " to fetch the file again");
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
    // snapshots/COMMIT/a/b -> ../../../blobs/BLOB: one "../" per folder up to the repo's.
    std::string target;
    for (std::size_t n = 2 + static_cast<std::size_t>(std::count(file.begin(), file.end(), '/')); n > 0; --n)
        target += "../";
    target += "blobs/" + blob;
    if (!fs::is_symlink(pointer, ec) || fs::read_symlink(pointer, ec) != target)  // anything else is replaced
        file::replace_with_symlink(pointer.string(), target);
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
    auto digest = blob_digest::for_blob(blob, size);
    if (!digest)
        raise(errc::InvalidArgument, "cannot write '" + file + "' into the Hub cache: its blob name '" + blob +
                                         "' is neither a sha256 nor a git blob id, so its bytes could not be checked");
    const std::string repo_dir = (fs::path(cache_dir) / hub_repo_folder(p)).string();
    const fs::path pointer = fs::path(repo_dir) / "snapshots" / commit / file;
    const fs::path blob_path = fs::path(repo_dir) / "blobs" / blob;
    // Every path the publish makes, checked before anything is written.
    check_hub_path(blob_path, cache_dir);
    check_hub_path(pointer, cache_dir);
    if (!revision.empty() && revision != commit) check_hub_path(fs::path(repo_dir) / "refs" / revision, cache_dir);
    std::error_code ec;
    const fs::file_status there = fs::symlink_status(blob_path, ec);
    if (fs::is_regular_file(there) && holds_blob(blob_path, blob, size)) {  // a blob of it already: not on its size alone
        link_hub_snapshot(repo_dir, file, revision, commit, blob);
        return nullptr;
    }
    if (fs::is_symlink(there)) fs::remove(blob_path, ec);  // planted: the temporary must not take its target's access
    const std::string key = blob_path.string() + '\n' + commit + '\n' + file;
    std::shared_ptr<hub_cache_entry> e;
    {
        std::lock_guard lock(hub_registry_mutex);
        if (auto had = hub_registry[key].lock()) return had;
        e = std::make_shared<hub_cache_entry>(repo_dir, file, revision, commit, blob, size, std::move(digest));
        e->key_ = key;
        hub_registry[key] = e;
    }
    if (size == 0) e->write(0, {});  // complete already: published when "" hashes to its name
    return e;
}

hub_cache_entry::hub_cache_entry(std::string repo_dir, std::string file, std::string revision, std::string commit,
                                 std::string blob, std::uint64_t size, std::shared_ptr<blob_digest> digest)
    : repo_dir_(std::move(repo_dir)), file_(std::move(file)), revision_(std::move(revision)),
      commit_(std::move(commit)), blob_name_(std::move(blob)), size_(size), digest_(std::move(digest)) {
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
        if (published_ || rejected_) return;
        for (std::uint64_t done = 0; done < len;) {
            const ssize_t n = ::pwrite(tmp_->fd(), bytes.data() + done, static_cast<std::size_t>(len - done),
                                       static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) raise_errno(n < 0 ? errno : EIO, "writing the Hub cache file '" + blob_ + "'", blob_);
            done += static_cast<std::uint64_t>(n);
        }
    }
    digest_->add(offset, bytes.first(static_cast<std::size_t>(len)));  // while they are in memory
    bool rejected_now = false;
    {
        std::unique_lock lock(mutex_);
        if (published_ || rejected_) return;
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
        if (whole) complete_locked();
        rejected_now = rejected_;
    }
    if (rejected_now) {  // a later load of the file starts afresh
        std::lock_guard lock(hub_registry_mutex);
        if (auto it = hub_registry.find(key_); it != hub_registry.end() && it->second.lock().get() == this)
            hub_registry.erase(it);
    }
}

void hub_cache_entry::complete_locked() {
    // Bytes that came after a gap a later write filled were not hashed in memory: from the file, once.
    if (!digest_->complete()) digest_->add_from_file(tmp_->fd(), blob_);
    if (!digest_->matches()) {
        rejected_ = true;
        tmp_->discard();
        return;
    }
    tmp_->publish(true, true);
    published_ = true;
    link_hub_snapshot(repo_dir_, file_, revision_, commit_, blob_name_);
}

}  // namespace ringsafe::stores

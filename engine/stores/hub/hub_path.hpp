// hf:// URLs as huggingface_hub spells them (its parse_hf_uri and hf_hub_url):
// hf://[models/|datasets/|spaces/|kernels/]ORG/NAME[@REVISION][/PATH], the
// resolve URL of a file, and the name of a repo's folder in the Hub cache.
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::stores {

// One hf:// URL, taken apart.
struct hub_path {
    std::string type = "model";  // "model", "dataset", "space" or "kernel"
    std::string repo;            // "ORG/NAME"
    std::string revision;        // percent-decoded ("refs/pr/3", "v1.0", a commit); empty: none given (main)
    std::string path;            // in the repo, as written; empty: the repo's checkpoint

    // The revision to ask for: `revision`, or "main".
    const std::string& revision_or_main() const;
};

// Parses `url` (hf:// in any case). The '@' after ORG/NAME starts the
// revision, which ends at the next '/' except for refs/pr/N and
// refs/convert/NAME; a '/' inside any other revision is written %2F. Throws
// InvalidArgument naming the URL and what is wrong: no ORG/NAME, a repo id
// huggingface_hub refuses, an empty revision, an empty, "." or ".." path
// segment, a bucket URL.
hub_path parse_hub_url(std::string_view url);

// The URL of `p` at revision `revision` (a commit when pinned):
// hf://[datasets/|spaces/|kernels/]ORG/NAME@REVISION[/PATH] (models without a type prefix
// unless ORG is a type's name, as in hf://models/datasets/NAME;
// '%' in the revision written %25, and '/' %2F unless it is refs/pr/N or refs/convert/NAME).
std::string hub_url(const hub_path& p, const std::string& revision);

// {endpoint}/[datasets/|spaces/|kernels/]ORG/NAME/resolve/{revision, quoted}/{path, quoted but '/'}.
std::string hub_resolve_url(const std::string& endpoint, const hub_path& p, const std::string& revision);

// "models--ORG--NAME" (datasets--, spaces--, kernels--): the repo's folder in the cache.
std::string hub_repo_folder(const hub_path& p);

// A full commit id: 40 lower-case hex digits.
bool is_commit_hash(std::string_view s) noexcept;

// The checkpoint of a repo named without a path: the index if the repo has one, else the single file.
inline constexpr std::string_view hub_index_file = "model.safetensors.index.json";
inline constexpr std::string_view hub_single_file = "model.safetensors";

}  // namespace ringsafe::stores

// The file source's engine-internal openers (file_source.cpp): over a file
// opened by file/file_open (blocking) or by async_open's ring operations, and
// under another name than its path (the dispatcher's hf:// cache files).
#pragma once

#include <memory>
#include <string>

#include "file/file_open.hpp"
#include "ringsafe/file_source.hpp"

namespace ringsafe::uring {

// InvalidArgument naming `path` for options out of range.
void check_file_options(const std::string& path, const file_options& o);

// A file source over a file opened either way (takes the descriptors), named
// `name` in messages (empty: the path).
std::unique_ptr<source> adopt_file(std::string path, const file_options& opts, file::opened_file f, std::string name = {});
// open_file(path, opts), the source named `name` (its messages about the file
// itself still name `path`): a store's cache file named by the URL it holds.
std::unique_ptr<source> open_file_named(const std::string& path, const std::string& name, const file_options& opts);

}  // namespace ringsafe::uring

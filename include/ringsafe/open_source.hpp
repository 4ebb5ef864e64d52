// Opening any source by name: a local path, or a URL of one of the six schemes
// http://, https://, s3://, gs://, az:// and hf:// (an hf:// file in the Hub
// cache opens as that local file).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ringsafe/file_source.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe {

// Options for open_source(): one set per kind of source.
struct source_options {
    file_options file;
    http_options http;
};

// True when `spec` names a remote object: it starts with one of the six
// schemes above (any case); anything else is a local path.
bool is_url(std::string_view spec) noexcept;

// Opens a local path or a URL (see is_url) with the matching options.
// Throws ringsafe::error naming the path or URL.
std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts = {});

}  // namespace ringsafe

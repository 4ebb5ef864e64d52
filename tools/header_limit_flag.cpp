// --max-header-size for the subcommands that read a header (header_limit_flag.hpp).
#include "header_limit_flag.hpp"

namespace ringsafe::cli {

void declare_header_limit(arg_parser& p) { p.option("--max-header-size"); }

void apply_header_limit(const arg_parser& p, parse_options& o) {
    o.max_header_size = p.size_or("--max-header-size", o.max_header_size);
}

}  // namespace ringsafe::cli

// A small, strict argument parser for the CLI's subcommands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringsafe::cli {

// Thrown for bad usage; the CLI prints the message and the subcommand's help, exit 2.
struct usage_error {
    std::string message;
};

// Parses `args` against the declared flags and options; everything else is positional.
// Accepts `--name value`, `--name=value`, and repeated options.
class arg_parser {
public:
    explicit arg_parser(std::vector<std::string_view> args) : args_(std::move(args)) {}

    void flag(std::string_view name);    // declare a boolean flag, e.g. "--json"
    void option(std::string_view name);  // declare an option taking a value, e.g. "--qd"
    void parse();                        // throws usage_error on an unknown --option or missing value

    bool has(std::string_view name) const;                            // flag or option given
    std::optional<std::string> value(std::string_view name) const;    // last value of an option
    std::vector<std::string> values(std::string_view name) const;     // every value, in order
    const std::vector<std::string>& positional() const { return positional_; }

    // Typed getters; throw usage_error naming the option on a bad value.
    std::uint64_t size_or(std::string_view name, std::uint64_t def) const;  // accepts 4K, 16M, 1G, 1MiB
    std::uint64_t uint_or(std::string_view name, std::uint64_t def) const;

private:
    std::vector<std::string_view> args_;
    std::vector<std::string> flags_, options_;
    std::vector<std::pair<std::string, std::string>> given_;
    std::vector<std::string> positional_;
};

// Parses "4096", "4K", "4KiB", "16M", "1G" (binary multiples). nullopt if malformed.
std::optional<std::uint64_t> parse_size(std::string_view text);

// "1.50 GiB"-style rendering of a byte count.
std::string human_bytes(std::uint64_t n);

}  // namespace ringsafe::cli

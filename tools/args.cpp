// A small, strict argument parser for the CLI's subcommands.
#include "args.hpp"

#include <algorithm>
#include <cstdio>

namespace ringsafe::cli {

void arg_parser::flag(std::string_view name) { flags_.emplace_back(name); }
void arg_parser::option(std::string_view name) { options_.emplace_back(name); }

void arg_parser::parse() {
    auto is = [](const std::vector<std::string>& v, std::string_view n) {
        return std::find(v.begin(), v.end(), n) != v.end();
    };
    bool only_positional = false;
    for (std::size_t i = 0; i < args_.size(); ++i) {
        std::string_view a = args_[i];
        if (only_positional || a.size() < 2 || a[0] != '-' || a == "-") {
            positional_.emplace_back(a);
            continue;
        }
        if (a == "--") {
            only_positional = true;
            continue;
        }
        std::string name(a), val;
        bool has_inline = false;
        if (auto eq = a.find('='); eq != std::string_view::npos && a.starts_with("--")) {
            name = std::string(a.substr(0, eq));
            val = std::string(a.substr(eq + 1));
            has_inline = true;
        }
        if (is(flags_, name)) {
            if (has_inline) throw usage_error{"flag " + name + " takes no value"};
            given_.emplace_back(name, "");
        } else if (is(options_, name)) {
            if (!has_inline) {
                if (i + 1 >= args_.size()) throw usage_error{"option " + name + " needs a value"};
                val = std::string(args_[++i]);
            }
            given_.emplace_back(name, val);
        } else {
            throw usage_error{"unknown option " + name};
        }
    }
}

bool arg_parser::has(std::string_view name) const {
    return std::any_of(given_.begin(), given_.end(), [&](auto& g) { return g.first == name; });
}

std::optional<std::string> arg_parser::value(std::string_view name) const {
    std::optional<std::string> out;
    for (auto& g : given_)
        if (g.first == name) out = g.second;
    return out;
}

std::vector<std::string> arg_parser::values(std::string_view name) const {
    std::vector<std::string> out;
    for (auto& g : given_)
        if (g.first == name) out.push_back(g.second);
    return out;
}

std::uint64_t arg_parser::size_or(std::string_view name, std::uint64_t def) const {
    auto v = value(name);
    if (!v) return def;
    auto n = parse_size(*v);
    if (!n) throw usage_error{"option " + std::string(name) + ": not a size: '" + *v + "'"};
    return *n;
}

std::uint64_t arg_parser::uint_or(std::string_view name, std::uint64_t def) const {
    auto v = value(name);
    if (!v) return def;
    std::uint64_t n = 0;
    if (v->empty()) throw usage_error{"option " + std::string(name) + " needs a number"};
    for (char c : *v) {
        if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10)
            throw usage_error{"option " + std::string(name) + ": not a number: '" + *v + "'"};
        n = n * 10 + static_cast<unsigned>(c - '0');
    }
    return n;
}

std::optional<std::uint64_t> parse_size(std::string_view t) {
    std::uint64_t n = 0;
    std::size_t i = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
        if (n > (UINT64_MAX - 9) / 10) return std::nullopt;
        n = n * 10 + static_cast<unsigned>(t[i] - '0');
    }
    if (i == 0) return std::nullopt;
    std::string_view unit = t.substr(i);
    if (unit.ends_with("iB")) unit.remove_suffix(2);
    else if (unit.ends_with("B") && unit.size() == 2) unit.remove_suffix(1);
    unsigned shift = 0;
    if (unit.empty()) shift = 0;
    else if (unit == "K" || unit == "k") shift = 10;
    else if (unit == "M" || unit == "m") shift = 20;
    else if (unit == "G" || unit == "g") shift = 30;
    else if (unit == "T" || unit == "t") shift = 40;
    else return std::nullopt;
    if (shift && n > (UINT64_MAX >> shift)) return std::nullopt;
    return n << shift;
}

std::string human_bytes(std::uint64_t n) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
    else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

}  // namespace ringsafe::cli

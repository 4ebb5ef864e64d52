// The one failure printer of the CLI's subcommands (failure_report.hpp).
#include "failure_report.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <system_error>

#include "ringsafe/error.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {

failure current_failure() {
    try {
        throw;
    } catch (const error& e) {
        return {std::string(e.kind()), e.message()};
    } catch (const std::system_error& e) {
        return {std::string(error_kind(e.code())), e.what()};
    } catch (const std::bad_alloc&) {
        return {std::string(error_kind(std::make_error_code(std::errc::not_enough_memory))), "out of memory"};
    } catch (const std::exception& e) {
        return {"Error", e.what()};
    } catch (...) {
        return {"Error", "unknown error"};
    }
}

void report_failure(std::string_view prefix, const failure& f, std::string_view source, bool json) {
    std::string line;
    if (json) {
        boost::json::object doc;
        doc.emplace("ok", false);
        doc.emplace("error_kind", f.kind);
        doc.emplace("error", f.message);
        line = boost::json::serialize(doc);
    } else {
        line = terminal_text(prefix);
        line += ": ";
        // The message names the source already (shown without its secrets, as terminal_text shows it)?
        if (!source.empty() && f.message.find(without_url_secrets(std::string(source))) == std::string::npos) {
            line += terminal_text(source);
            line += ": ";
        }
        line += terminal_text(f.kind);
        line += ": ";
        line += terminal_text(f.message);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), json ? stdout : stderr);
    std::fflush(json ? stdout : stderr);
}

}  // namespace ringsafe::cli

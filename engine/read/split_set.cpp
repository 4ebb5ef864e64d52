// Split GGUF sets (llama.cpp's gguf-split): the parts' names from one part's
// name and split keys, and llama.cpp's loader's checks of the parts opened.
#include <cstdio>

#include "read/reader_impl.hpp"

namespace ringsafe::read {
namespace {

// llama.cpp's split_path postfix: "-%05d-of-%05d.gguf" of the 1-based part number.
std::string part_postfix(std::uint64_t part, std::uint64_t count) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "-%05llu-of-%05llu.gguf", static_cast<unsigned long long>(part),
                  static_cast<unsigned long long>(count));
    return buf;
}

// The last path component of a path or URL (without a URL's query and fragment).
std::string file_name(const std::string& spec) {
    std::string path = is_url(spec) ? spec.substr(0, spec.find_first_of("?#")) : spec;
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void bad_set(const std::string& opened, const std::string& why) {
    raise(errc::InvalidIndex, "split GGUF set of " + opened + ": " + why);
}

}  // namespace

split_set split_parts(const reader::impl& r, const std::string& spec, const source& src, const shard_header& h) {
    if (h.format != file_format::gguf || !r.opts.gguf_split_set) return {};
    try {
        const std::optional<gguf::split_info> s = h.gguf->split();
        if (!s || s->count < 2) return {};
        if (s->no >= s->count)
            raise(errc::InvalidIndex, "split.no " + std::to_string(s->no) + " is not below split.count " +
                                          std::to_string(s->count));
        const std::string name = file_name(spec);
        const std::string postfix = part_postfix(s->no + 1, s->count);
        if (!name.ends_with(postfix))
            raise(errc::InvalidIndex, "part " + std::to_string(s->no + 1) + " of " + std::to_string(s->count) +
                                          " of a split GGUF set (split.no " + std::to_string(s->no) +
                                          ") whose name does not end in " + postfix +
                                          ", so the other parts' names are not known (open it alone with "
                                          "gguf_split_set = false)");
        const std::string stem = name.substr(0, name.size() - postfix.size());
        split_set out;
        out.self = static_cast<std::size_t>(s->no);
        out.parts.reserve(static_cast<std::size_t>(s->count));
        for (std::uint64_t i = 0; i < s->count; ++i)
            out.parts.push_back(i == s->no ? spec : resolve_shard(spec, stem + part_postfix(i + 1, s->count)));
        return out;
    } catch (const error& e) {
        header_read_failed(src, e);
    }
}

void adopt_split(reader::impl& r, const std::string& opened, std::vector<opened_shard> parts) {
    const std::size_t n = parts.size();
    for (std::size_t i = 0; i < n; ++i)
        if (parts[i].err)
            rethrow_failed(parts[i], "split GGUF set of " + opened + ", part " + std::to_string(i + 1) + " of " +
                                         std::to_string(n) + " (" + parts[i].spec + "): ");
    std::uint64_t tensors = 0, expected = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const opened_shard& o = parts[i];
        const std::string part = "part " + std::to_string(i + 1) + " of " + std::to_string(n) + " (" + o.spec + ")";
        if (o.hdr->format != file_format::gguf) bad_set(opened, part + " is not a GGUF file");
        std::optional<gguf::split_info> s;
        try {
            s = o.hdr->gguf->split();
        } catch (const error& e) {
            bad_set(opened, part + ": " + e.message());
        }
        if (!s) bad_set(opened, part + " has no split keys (split.no, split.count): it is not part of this set");
        if (s->no != i)
            bad_set(opened, part + " says split.no " + std::to_string(s->no) + ", expected " + std::to_string(i));
        if (s->count != n)
            bad_set(opened, part + " says split.count " + std::to_string(s->count) + ", expected " + std::to_string(n));
        if (i == 0) expected = s->tensors_count;
        if (s->tensors_count != expected)
            bad_set(opened, part + " says split.tensors.count " + std::to_string(s->tensors_count) + ", part 1 " +
                                std::to_string(expected));
        tensors += o.hdr->tensors.size();
    }
    if (tensors != expected)
        bad_set(opened, "its " + std::to_string(n) + " parts hold " + std::to_string(tensors) +
                            " tensors, but split.tensors.count says " + std::to_string(expected));
    r.sharded = true;
    for (auto& o : parts) r.add_shard(std::move(o.spec), std::move(o.src), std::move(*o.hdr));
    try {
        r.finish();
    } catch (const error& e) {
        bad_set(opened, e.message());  // a tensor name in two parts
    }
}

}  // namespace ringsafe::read

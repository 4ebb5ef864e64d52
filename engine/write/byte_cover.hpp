// Which bytes of a tensor a declared writer has written: disjoint ranges,
// merged as writes land in any order, so finish() can name what is missing.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <string>

namespace ringsafe::write {

class byte_cover {
public:
    // Records [a, b) as written.
    void mark(std::uint64_t a, std::uint64_t b) {
        auto it = ranges_.upper_bound(a);
        if (it != ranges_.begin() && std::prev(it)->second >= a) --it;
        while (it != ranges_.end() && it->first <= b) {
            a = std::min(a, it->first);
            b = std::max(b, it->second);
            covered_ -= it->second - it->first;
            it = ranges_.erase(it);
        }
        ranges_.emplace(a, b);
        covered_ += b - a;
    }
    std::uint64_t covered() const noexcept { return covered_; }
    // The first byte not written (0 when the first range does not start at 0).
    std::uint64_t first_missing() const noexcept {
        return !ranges_.empty() && ranges_.begin()->first == 0 ? ranges_.begin()->second : 0;
    }
    // "N of M bytes written, first missing byte at offset K" for a tensor of `size` bytes.
    std::string describe_missing(std::uint64_t size) const {
        return std::to_string(covered_) + " of " + std::to_string(size) +
               " bytes written, first missing byte at offset " + std::to_string(first_missing());
    }

private:
    std::map<std::uint64_t, std::uint64_t> ranges_;  // begin -> end
    std::uint64_t covered_ = 0;
};

}  // namespace ringsafe::write

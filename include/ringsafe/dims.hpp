// ringsafe::dims: a tensor's shape, as tensor_info holds it. Up to four
// dimensions live inside the object (no allocation: a header of millions of
// tensors is parsed without one allocation per shape); more go to the heap.
// Reads like a std::vector<std::uint64_t> and converts to and from one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <vector>

namespace ringsafe {

class dims {
public:
    using value_type = std::uint64_t;
    using size_type = std::size_t;
    using const_iterator = const std::uint64_t*;
    using iterator = std::uint64_t*;
    static constexpr size_type inline_capacity = 4;

    dims() noexcept = default;
    dims(std::initializer_list<std::uint64_t> d) { assign(d.begin(), d.end()); }
    dims(const std::vector<std::uint64_t>& d) { assign(d.begin(), d.end()); }  // NOLINT: implicit by design
    dims(std::span<const std::uint64_t> d) { assign(d.begin(), d.end()); }    // NOLINT
    template <class It>
    dims(It first, It last) {
        assign(first, last);
    }
    dims(const dims& o) { assign(o.begin(), o.end()); }
    dims(dims&& o) noexcept { take(o); }
    dims& operator=(const dims& o) {
        if (this != &o) assign(o.begin(), o.end());
        return *this;
    }
    dims& operator=(dims&& o) noexcept {
        if (this != &o) release(), take(o);
        return *this;
    }
    ~dims() { release(); }

    // The same dimensions as a std::vector.
    operator std::vector<std::uint64_t>() const { return {begin(), end()}; }  // NOLINT: implicit by design
    std::vector<std::uint64_t> to_vector() const { return {begin(), end()}; }

    size_type size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    const std::uint64_t* data() const noexcept { return size_ > inline_capacity ? u_.heap : u_.local; }
    std::uint64_t* data() noexcept { return size_ > inline_capacity ? u_.heap : u_.local; }
    const_iterator begin() const noexcept { return data(); }
    const_iterator end() const noexcept { return data() + size_; }
    iterator begin() noexcept { return data(); }
    iterator end() noexcept { return data() + size_; }
    std::uint64_t operator[](size_type i) const noexcept { return data()[i]; }
    std::uint64_t& operator[](size_type i) noexcept { return data()[i]; }
    // Bounds-checked access: std::out_of_range past the end.
    std::uint64_t at(size_type i) const {
        if (i >= size_) throw std::out_of_range("ringsafe::dims::at");
        return data()[i];
    }
    std::uint64_t front() const noexcept { return data()[0]; }
    std::uint64_t back() const noexcept { return data()[size_ - 1]; }

    // Replaces the dimensions with [first, last).
    template <class It>
    void assign(It first, It last) {
        const auto n = static_cast<size_type>(std::distance(first, last));
        if (n > inline_capacity) {
            auto* p = new std::uint64_t[n];
            std::copy(first, last, p);
            release();
            u_.heap = p;
        } else {
            release();
            std::copy(first, last, u_.local);
        }
        size_ = static_cast<std::uint32_t>(n);
    }
    void clear() noexcept { release(); }
    // Appends one dimension.
    void push_back(std::uint64_t d) {
        if (size_ < inline_capacity) {
            u_.local[size_++] = d;
            return;
        }
        std::vector<std::uint64_t> v(begin(), end());
        v.push_back(d);
        assign(v.begin(), v.end());
    }

    friend bool operator==(const dims& a, const dims& b) noexcept {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }
    friend bool operator==(const dims& a, const std::vector<std::uint64_t>& b) noexcept {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }

private:
    void release() noexcept {
        if (size_ > inline_capacity) delete[] u_.heap;
        size_ = 0;
    }
    void take(dims& o) noexcept {
        size_ = o.size_;
        if (size_ > inline_capacity) u_.heap = o.u_.heap;
        else std::memcpy(u_.local, o.u_.local, sizeof u_.local);
        o.size_ = 0;
    }

    union storage {
        std::uint64_t local[inline_capacity];
        std::uint64_t* heap;
    } u_{};
    std::uint32_t size_ = 0;
};

}  // namespace ringsafe

// The arguments both Python device reads take, as ringsafe/device.hpp's types
// (engine-internal, the Python front end only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ringsafe/device.hpp"

namespace ringsafe::python {

struct device_request {
    std::vector<device_span> spans;
    device_options options;
};

// (address, size) destinations and the staging options, checked later by read_to_device().
inline device_request device_request_of(const std::vector<std::pair<std::uintptr_t, std::size_t>>& dsts,
                                        int device, std::size_t staging_size, std::size_t staging_count,
                                        bool stand_in) {
    device_request q;
    q.spans.reserve(dsts.size());
    for (auto [addr, size] : dsts) q.spans.push_back({reinterpret_cast<void*>(addr), size});
    q.options.device = device;
    q.options.staging_size = staging_size;
    q.options.staging_count = staging_count;
    q.options.stand_in = stand_in;
    return q;
}

}  // namespace ringsafe::python

// The device pipeline over any copier: staging ring, reads planned into it by
// the reader, copies submitted per staging buffer, buffers recycled when their
// copies complete (engine-internal; read_to_device() picks the copier).
#pragma once

#include <span>
#include <vector>

#include "device/copier.hpp"
#include "ringsafe/device.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::device {

// Checks the staging options (InvalidArgument naming the bad one).
void check_options(const device_options& opts);

// Checks the options and every destination as reader::plan() would
// (selection, count, sizes, overlap) without any I/O. Throws ringsafe::error.
void check_targets(const reader& r, const selection& sel, std::span<const device_span> dsts,
                   const device_options& opts);

// read_to_device() with the copier `c` (which must have opts.staging_count
// slots), for targets the caller checked with check_targets(), and the
// staging buffers in `memory` (slot i uses memory[i]; missing
// ones are allocated from `c` and kept there for the next call). On return,
// also by exception, every submitted slot has been waited for.
device_read_stats staged_read(reader& r, const selection& sel, std::span<const device_span> dsts,
                              const device_options& opts, const read_control& ctl, copier& c,
                              std::vector<staging_block>& memory);

// Tests only: the host stand-in's hooks (stand_in_hooks), which the public
// device_options do not carry. InvalidArgument unless opts.stand_in.
device_stager stand_in_stager(const device_options& opts, stand_in_hooks hooks);
device_read_stats read_with_stand_in_hooks(reader& r, const selection& sel, std::span<const device_span> dsts,
                                           const device_options& opts, const read_control& ctl,
                                           stand_in_hooks hooks);

}  // namespace ringsafe::device

// read_to_device(): checks the call, picks the copier (CUDA or the host
// stand-in) and runs the staging pipeline.
#include <exception>

#include "format/error_context.hpp"

#include "device/cuda_runtime.hpp"
#include "device/host_copier.hpp"
#include "device/staged_read.hpp"

namespace ringsafe {

device_read_stats read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                                 const device_options& opts, const read_control& ctl) {
    device::check_targets(r, sel, dsts, opts);  // before loading anything
    std::unique_ptr<device::copier> c;
    if (opts.stand_in)
        c = std::make_unique<device::host_copier>(opts.staging_count,
                                                  device::stand_in_hooks{opts.stand_in_fail_piece, opts.stand_in_before_copy});
    else
        c = device::make_cuda_copier(opts.device, opts.staging_count);
    return device::staged_read(r, sel, dsts, opts, ctl, *c);
}

bool read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                    const device_options& opts, const read_control& ctl, status& st) noexcept {
    st.clear();
    try {
        read_to_device(r, sel, dsts, opts, ctl);
        return true;
    } catch (const std::system_error& e) {
        st.code = e.code();
        st.message = detail::bare_message(e);
    } catch (const std::exception& e) {
        st.code = make_error_code(errc::IoError);
        st.message = e.what();
    }
    return false;
}

bool cuda_runtime_available(std::string* why) noexcept {
    try {
        (void)device::cuda_runtime();
        return true;
    } catch (const std::exception& e) {
        if (why) *why = e.what();
    }
    return false;
}

}  // namespace ringsafe

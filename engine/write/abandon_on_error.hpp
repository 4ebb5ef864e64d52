// The writers' one rule for a failing step: the file is abandoned (its
// temporary removed, nothing at the target path), then the error goes on.
#pragma once

#include <utility>

namespace ringsafe::write {

// Runs f(); on any exception calls owner.abandon_now() (noexcept), then rethrows.
template <class Owner, class F>
void abandon_on_error(Owner& owner, F&& f) {
    try {
        std::forward<F>(f)();
    } catch (...) {
        owner.abandon_now();
        throw;
    }
}

}  // namespace ringsafe::write

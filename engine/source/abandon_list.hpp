// What a group of asynchronous steps has in flight (ring operations, open
// connections, timers), so that the group can be abandoned at once: every pending socket read, connect or
// backoff wait completes now (with an error) instead of when the server
// speaks again. Used on the group's executor only (not thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

namespace ringsafe::detail {

class abandon_list {
public:
    // Runs every registered action (close a socket, cancel a timer) once;
    // actions registered later run as soon as they are registered.
    void abandon() {
        abandoned_ = true;
        auto actions = std::move(actions_);
        actions_.clear();
        for (auto& [id, fn] : actions) fn();
    }
    bool abandoned() const noexcept { return abandoned_; }

    // Registers `action` for the entry's lifetime (RAII). A null list makes it a no-op.
    class entry {
    public:
        entry(abandon_list* list, std::function<void()> action) : list_(list) {
            if (!list_) return;
            if (list_->abandoned_) {
                action();
                list_ = nullptr;
                return;
            }
            id_ = ++list_->next_id_;
            list_->actions_.emplace(id_, std::move(action));
        }
        ~entry() {
            if (list_) list_->actions_.erase(id_);
        }
        entry(const entry&) = delete;
        entry& operator=(const entry&) = delete;

    private:
        abandon_list* list_;
        std::uint64_t id_ = 0;
    };

private:
    std::map<std::uint64_t, std::function<void()>> actions_;
    std::uint64_t next_id_ = 0;
    bool abandoned_ = false;
};

}  // namespace ringsafe::detail

#include "confirm_window.h"

#include <utility>

namespace whizbang::core {

std::uint64_t ConfirmWindow::published(std::string id) {
    outstanding_.emplace(++last_tag_, std::move(id));
    return last_tag_;
}

std::vector<std::string> ConfirmWindow::take(std::uint64_t tag, bool multiple) {
    std::vector<std::string> ids;
    if (!multiple) {
        auto it = outstanding_.find(tag);
        if (it != outstanding_.end()) {
            ids.push_back(std::move(it->second));
            outstanding_.erase(it);
        }
        return ids;
    }
    // AMQP 0-9-1: with multiple set, a delivery tag of zero means "all outstanding".
    const auto end = tag == 0 ? outstanding_.end() : outstanding_.upper_bound(tag);
    for (auto it = outstanding_.begin(); it != end; ++it) ids.push_back(std::move(it->second));
    outstanding_.erase(outstanding_.begin(), end);
    return ids;
}

std::size_t ConfirmWindow::ack(std::uint64_t tag, bool multiple) { return take(tag, multiple).size(); }

std::vector<std::string> ConfirmWindow::nack(std::uint64_t tag, bool multiple) { return take(tag, multiple); }

}  // namespace whizbang::core

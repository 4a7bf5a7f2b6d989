// The publisher-confirm bookkeeping of the relay's AMQP sink (issue 32): which published
// messages the broker has not yet acknowledged. On a channel in confirm mode the broker numbers
// publishes 1, 2, 3, … (delivery tags) and answers each with basic.ack or basic.nack, possibly
// for many at once ("multiple": every tag up to and including this one) and not necessarily in
// order. Kept apart from librabbitmq so that these rules are unit-tested.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core {

class ConfirmWindow {
public:
    // Records the next publish (carrying message `id`, for error messages) and returns its tag.
    std::uint64_t published(std::string id);
    // A basic.ack: settles `tag`, or with `multiple` every outstanding tag <= `tag` (a tag of 0
    // with `multiple` means every outstanding one). Returns how many were settled; tags never
    // published or already settled count for nothing (a broker does not send them, and a
    // repeated ack must not settle a later publish).
    std::size_t ack(std::uint64_t tag, bool multiple);
    // A basic.nack, settled like ack but returning the ids of the refused messages.
    std::vector<std::string> nack(std::uint64_t tag, bool multiple);
    // Every publish has its answer.
    bool settled() const { return outstanding_.empty(); }
    std::size_t outstanding() const { return outstanding_.size(); }

private:
    std::vector<std::string> take(std::uint64_t tag, bool multiple);

    std::uint64_t last_tag_ = 0;
    std::map<std::uint64_t, std::string> outstanding_;
};

}  // namespace whizbang::core

#include "delivery_verdict.h"

#include <cctype>

namespace whizbang::core {

Delivery http_status_delivery(long status) {
    if (status >= 200 && status <= 299) return Delivery::kAcknowledged;
    if (status == 408 || status == 429 || (status >= 500 && status <= 599)) return Delivery::kRetry;
    return Delivery::kRefused;
}

std::optional<std::int64_t> parse_retry_after_seconds(std::string_view value, std::int64_t max_seconds) {
    auto space = [](char c) { return c == ' ' || c == '\t'; };
    while (!value.empty() && space(value.front())) value.remove_prefix(1);
    while (!value.empty() && space(value.back())) value.remove_suffix(1);
    if (value.empty()) return std::nullopt;
    std::int64_t seconds = 0;
    for (char c : value) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
        // Saturate instead of overflowing: "99999999999999999999" is just "a long time".
        if (seconds < max_seconds) seconds = seconds * 10 + (c - '0');
    }
    return seconds < max_seconds ? seconds : max_seconds;
}

bool amqp_reply_code_transient(int reply_code) {
    switch (reply_code) {
        case 320:  // connection-forced
        case 405:  // resource-locked
        case 506:  // resource-error
        case 541:  // internal-error
            return true;
        default:
            return false;
    }
}

}  // namespace whizbang::core

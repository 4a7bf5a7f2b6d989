#include "backoff.h"

#include <algorithm>
#include <cmath>

namespace whizbang::core {

std::int64_t retry_delay_us(int attempts, std::int64_t base_seconds, std::int64_t max_seconds, double unit_random,
                            int jitter_percent) {
    base_seconds = std::max<std::int64_t>(base_seconds, 0);
    max_seconds = std::max<std::int64_t>(max_seconds, 0);
    // 2^62 seconds is far beyond any max_seconds: stop doubling there instead of overflowing.
    const int doublings = std::clamp(attempts - 1, 0, 62);
    std::int64_t seconds = max_seconds;
    if (base_seconds == 0) {
        seconds = 0;
    } else if (doublings < 62 && base_seconds <= (max_seconds >> doublings)) {
        seconds = base_seconds << doublings;
    }
    const double jitter = std::clamp(jitter_percent, 0, 100) / 100.0;
    const double factor = 1.0 - jitter + jitter * std::clamp(unit_random, 0.0, 1.0);
    const double us = static_cast<double>(seconds) * 1e6 * factor;
    constexpr double kMaxUs = 9.0e18;  // below INT64_MAX, so the conversion is defined
    return us >= kMaxUs ? static_cast<std::int64_t>(kMaxUs) : static_cast<std::int64_t>(std::llround(us));
}

}  // namespace whizbang::core

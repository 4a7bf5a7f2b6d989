// Retry delay of a failed delivery (DESIGN §3.4).
#pragma once

#include <cstdint>

#include "no_postgres.h"

namespace whizbang::core {

// The share of a retry delay that is random unless a retry policy says otherwise (DESIGN §3.4:
// a factor in [0.75, 1.0]).
constexpr int kDefaultJitterPercent = 25;

// min(base · 2^(attempts−1), max) seconds, multiplied by a factor in [1 − jitter, 1.0] taken
// from `unit_random` in [0, 1), jitter = jitter_percent / 100 (clamped to 0..100) — the jitter
// keeps retries of one failure burst from arriving together. Returned in microseconds;
// attempts < 1 counts as 1; never overflows.
std::int64_t retry_delay_us(int attempts, std::int64_t base_seconds, std::int64_t max_seconds, double unit_random,
                            int jitter_percent = kDefaultJitterPercent);

}  // namespace whizbang::core

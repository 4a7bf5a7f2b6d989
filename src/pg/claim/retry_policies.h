// Retry policies per consumer (0.16.0, DESIGN §3.11): wh_retry_policies overrides, column by
// column, the database settings max_attempts, retry_base_seconds and retry_max_seconds (and the
// jitter, DESIGN §3.4's 25 %) for one (source, consumer). Claims read the attempt limit of each
// row's consumer; fail_work the whole policy of its consumer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "pg/claim/work.h"

namespace whizbang::pg {

struct RetryPolicy {
    int64_t max_attempts = 0;
    int64_t base_seconds = 0;
    int64_t max_seconds = 0;
    int jitter_percent = 0;
};

// The policies of one source in effect when it was made (a copy: a cache invalidation during
// the call cannot change them under it). Needs an open SPI connection to be made; of() never
// throws, so it serves code on the PostgreSQL side of the boundary too.
class RetryPolicies {
public:
    explicit RetryPolicies(Source source);
    const RetryPolicy& of(const std::string& consumer) const noexcept {
        if (own_.empty()) return fallback_;
        auto it = own_.find(consumer);
        return it == own_.end() ? fallback_ : it->second;
    }

private:
    RetryPolicy fallback_;
    std::unordered_map<std::string, RetryPolicy> own_;
};

}  // namespace whizbang::pg

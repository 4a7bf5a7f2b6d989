#include "idempotency.h"

#include <gtest/gtest.h>

#include "error.h"

namespace whizbang::core {
namespace {

constexpr std::int64_t kSecond = 1000000;

KeyRecord in_progress(std::int64_t lease_expires, std::optional<std::string> fp = std::nullopt) {
    KeyRecord k;
    k.state = KeyState::in_progress;
    k.lease_expires_us = lease_expires;
    k.fingerprint = std::move(fp);
    return k;
}

KeyRecord completed(std::int64_t result_expires, std::int64_t tombstone_expires, std::optional<std::string> fp = {}) {
    KeyRecord k;
    k.state = KeyState::completed;
    k.result_expires_us = result_expires;
    k.tombstone_expires_us = tombstone_expires;
    k.fingerprint = std::move(fp);
    return k;
}

TEST(IdempotencyDecision, LiveClaimIsInProgressDuplicate) {
    EXPECT_EQ(decide_begin(in_progress(100 * kSecond), std::nullopt, 50 * kSecond), BeginDecision::in_progress_duplicate);
}

TEST(IdempotencyDecision, AbandonedClaimIsReclaimedAtItsTtl) {
    EXPECT_EQ(decide_begin(in_progress(100 * kSecond), std::nullopt, 100 * kSecond), BeginDecision::reclaim);
}

TEST(IdempotencyDecision, ChangedPayloadIsConflictWhateverTheState) {
    EXPECT_EQ(decide_begin(in_progress(100 * kSecond, "a"), std::string("b"), 0), BeginDecision::conflict);
    EXPECT_EQ(decide_begin(in_progress(100 * kSecond, "a"), std::string("b"), 200 * kSecond), BeginDecision::conflict);
    EXPECT_EQ(decide_begin(completed(100, 200, "a"), std::string("b"), 150), BeginDecision::conflict);
    EXPECT_EQ(decide_begin(completed(100, 200, "a"), std::string("b"), 50), BeginDecision::conflict);
}

TEST(IdempotencyDecision, MissingFingerprintOnEitherSideIsNoConflict) {
    EXPECT_EQ(decide_begin(completed(100, 200, "a"), std::nullopt, 50), BeginDecision::completed_duplicate);
    EXPECT_EQ(decide_begin(completed(100, 200), std::string("b"), 50), BeginDecision::completed_duplicate);
}

TEST(IdempotencyDecision, ResultThenTombstoneThenForgotten) {
    KeyRecord k = completed(100, 200, "a");
    EXPECT_EQ(decide_begin(k, std::string("a"), 99), BeginDecision::completed_duplicate);
    EXPECT_EQ(decide_begin(k, std::string("a"), 100), BeginDecision::expired_duplicate);
    EXPECT_EQ(decide_begin(k, std::string("a"), 199), BeginDecision::expired_duplicate);
    EXPECT_EQ(decide_begin(k, std::string("a"), 200), BeginDecision::reclaim);
    // Once forgotten, even another payload may claim the key.
    EXPECT_EQ(decide_begin(k, std::string("z"), 200), BeginDecision::reclaim);
}

TEST(IdempotencyPolicy, ResultTtlBoundsAreInclusive) {
    TtlPolicy p{60 * kSecond, 10 * kSecond, 5 * kSecond, 20 * kSecond, 0};
    EXPECT_NO_THROW(require_result_ttl_in_bounds(5 * kSecond, p, "s"));
    EXPECT_NO_THROW(require_result_ttl_in_bounds(20 * kSecond, p, "s"));
    EXPECT_THROW(require_result_ttl_in_bounds(4 * kSecond, p, "s"), InputError);
    EXPECT_THROW(require_result_ttl_in_bounds(21 * kSecond, p, "s"), InputError);
    EXPECT_THROW(require_result_ttl_in_bounds(0, p, "s"), InputError);
    try {
        require_result_ttl_in_bounds(30 * kSecond, p, "payments");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.kind(), InputError::Kind::invalid_parameter);
        EXPECT_STREQ(e.what(), "result TTL 30s is outside the policy of scope \"payments\": [5s, 20s]");
    }
}

TEST(IdempotencyPolicy, FractionalSecondsInMessages) {
    TtlPolicy p{60 * kSecond, 10 * kSecond, 1 * kSecond, 20 * kSecond, 0};
    try {
        require_result_ttl_in_bounds(50000, p, "s");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_STREQ(e.what(), "result TTL 0.05s is outside the policy of scope \"s\": [1s, 20s]");
    }
}

TEST(IdempotencyPolicy, TtlMustBePositive) {
    EXPECT_THROW(require_positive_ttl(0, "p_in_progress_ttl"), InputError);
    EXPECT_THROW(require_positive_ttl(-1, "p_in_progress_ttl"), InputError);
    EXPECT_NO_THROW(require_positive_ttl(1, "p_in_progress_ttl"));
}

TEST(IdempotencyOutcomes, Words) {
    EXPECT_STREQ(outcome_word(BeginDecision::reclaim), "claimed");
    EXPECT_STREQ(outcome_word(BeginDecision::in_progress_duplicate), "in_progress_duplicate");
    EXPECT_STREQ(outcome_word(BeginDecision::completed_duplicate), "completed_duplicate");
    EXPECT_STREQ(outcome_word(BeginDecision::expired_duplicate), "expired_duplicate");
    EXPECT_STREQ(outcome_word(BeginDecision::conflict), "conflict");
}

}  // namespace
}  // namespace whizbang::core

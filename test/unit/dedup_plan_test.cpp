#include "dedup_plan.h"

#include <gtest/gtest.h>

namespace whizbang::core {
namespace {

Uuid id(std::uint8_t last) {
    Uuid u{};
    u[15] = last;
    return u;
}

DedupElement element(std::uint8_t last, std::optional<std::string> fp = std::nullopt, bool expired = false) {
    DedupElement e;
    e.id = id(last);
    e.fingerprint = std::move(fp);
    e.expired = expired;
    return e;
}

using O = DedupOutcome;

TEST(DedupPlan, KeysAreDistinctAndSortedForCanonicalLockOrder) {
    std::vector<DedupElement> in = {element(3), element(1), element(3), element(2)};
    DedupPlan plan(in);
    ASSERT_EQ(plan.keys().size(), 3u);
    EXPECT_EQ(plan.keys()[0].id, id(1));
    EXPECT_EQ(plan.keys()[1].id, id(2));
    EXPECT_EQ(plan.keys()[2].id, id(3));
    EXPECT_EQ(plan.keys()[2].observations, 2);
    EXPECT_EQ(plan.keys()[2].recording_element, 0);
}

TEST(DedupPlan, RepeatInsideBatchIsDuplicateAfterFirst) {
    std::vector<DedupElement> in = {element(3), element(1), element(3)};
    DedupPlan plan(in);
    auto r = plan.resolve({{true, std::nullopt}, {true, std::nullopt}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::fresh, O::fresh, O::duplicate}));
    EXPECT_TRUE(r.adjustments.empty());
    EXPECT_TRUE(r.remove.empty());
}

TEST(DedupPlan, OnRecordIsDuplicateOrConflictByStoredFingerprint) {
    std::vector<DedupElement> in = {element(1, "a"), element(1, "b"), element(1)};
    DedupPlan plan(in);
    ASSERT_EQ(plan.keys()[0].fingerprint, &*in[0].fingerprint);
    auto r = plan.resolve({{false, std::string("a")}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::duplicate, O::conflict, O::duplicate}));
    ASSERT_EQ(r.adjustments.size(), 1u);
    EXPECT_EQ(r.adjustments[0].conflicts, 1);
    EXPECT_EQ(r.adjustments[0].observations, 0);
}

TEST(DedupPlan, NewIdIsRecordedWithTheFingerprintOfItsRecordingElement) {
    // Recorded without a fingerprint: later payloads cannot conflict with it.
    std::vector<DedupElement> without = {element(1), element(1, "x"), element(1, "y")};
    DedupPlan plain(without);
    EXPECT_EQ(plain.keys()[0].fingerprint, nullptr);
    auto r = plain.resolve({{true, std::nullopt}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::fresh, O::duplicate, O::duplicate}));
    EXPECT_TRUE(r.adjustments.empty());
    // Recorded with "x": "y" later in the batch conflicts, "x" and no fingerprint do not.
    std::vector<DedupElement> with = {element(1, "x"), element(1), element(1, "y"), element(1, "x")};
    DedupPlan fingerprinted(with);
    ASSERT_NE(fingerprinted.keys()[0].fingerprint, nullptr);
    EXPECT_EQ(*fingerprinted.keys()[0].fingerprint, "x");
    r = fingerprinted.resolve({{true, std::string("x")}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::fresh, O::duplicate, O::conflict, O::duplicate}));
    ASSERT_EQ(r.adjustments.size(), 1u);
    EXPECT_EQ(r.adjustments[0].conflicts, 1);
}

TEST(DedupPlan, ExpiredAndNotOnRecordIsRemovedAgain) {
    std::vector<DedupElement> in = {element(1, std::nullopt, true), element(1, std::nullopt, true)};
    DedupPlan plan(in);
    EXPECT_EQ(plan.keys()[0].recording_element, -1);
    EXPECT_EQ(plan.keys()[0].observations, 2);
    auto r = plan.resolve({{true, std::nullopt}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::expired, O::expired}));
    ASSERT_EQ(r.remove.size(), 1u);
    EXPECT_EQ(r.remove[0], id(1));
}

TEST(DedupPlan, ExpiredButOnRecordIsDuplicate) {
    std::vector<DedupElement> in = {element(1, std::nullopt, true)};
    DedupPlan plan(in);
    auto r = plan.resolve({{false, std::nullopt}});
    EXPECT_EQ(r.outcomes, (std::vector<O>{O::duplicate}));
    EXPECT_TRUE(r.remove.empty());
}

TEST(DedupPlan, ExpiredBeforeRecordingElement) {
    // An old copy arrives first, a fresh one second: the fresh one records the id.
    std::vector<DedupElement> in = {element(1, std::nullopt, true), element(1)};
    DedupPlan plan(in);
    EXPECT_EQ(plan.keys()[0].recording_element, 1);
    EXPECT_EQ(plan.keys()[0].observations, 1);
    auto fresh = plan.resolve({{true, std::nullopt}});
    EXPECT_EQ(fresh.outcomes, (std::vector<O>{O::expired, O::fresh}));
    EXPECT_TRUE(fresh.adjustments.empty());
    // Already on record: both are duplicates, and the old copy the upsert skipped is counted.
    auto known = plan.resolve({{false, std::nullopt}});
    EXPECT_EQ(known.outcomes, (std::vector<O>{O::duplicate, O::duplicate}));
    ASSERT_EQ(known.adjustments.size(), 1u);
    EXPECT_EQ(known.adjustments[0].observations, 1);
}

TEST(DedupPlan, OutcomeWords) {
    EXPECT_STREQ(outcome_word(O::fresh), "new");
    EXPECT_STREQ(outcome_word(O::duplicate), "duplicate");
    EXPECT_STREQ(outcome_word(O::conflict), "conflict");
    EXPECT_STREQ(outcome_word(O::expired), "expired");
}

}  // namespace
}  // namespace whizbang::core

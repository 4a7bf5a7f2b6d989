#include <gtest/gtest.h>

#include "generation_span.h"

namespace whizbang::core::generations {
namespace {

constexpr std::int64_t H = kMicrosPerHour, D = 24 * H;
// 2026-12-02 00:00 UTC as a timestamptz: days since 2000-01-01.
constexpr std::int64_t kDec2 = 9832 * D;

TEST(GenerationSpan, PeriodStartFloorsAlsoBefore2000) {
    EXPECT_EQ(period_start(kDec2 + 5 * H, D), kDec2);
    EXPECT_EQ(period_start(kDec2, D), kDec2);
    EXPECT_EQ(period_start(-1, D), -D);
    EXPECT_EQ(period_start(-D, D), -D);
    EXPECT_EQ(period_start(kDec2 + 7 * H, 6 * H), kDec2 + 6 * H);
}

TEST(GenerationSpan, NamesAreUtcDates) {
    EXPECT_EQ(generation_name("wh_message_deduplication", Span{kDec2, kDec2 + D}), "wh_message_deduplication_g20261202");
    EXPECT_EQ(generation_name("d", Span{kDec2 + 6 * H, kDec2 + 12 * H}), "d_g20261202t0600");
    EXPECT_EQ(generation_name("d", Span{0, D}), "d_g20000101");
    EXPECT_EQ(generation_name("d", Span{-D, 0}), "d_g19991231");
    EXPECT_EQ(generation_name("d", Span{59 * D, 60 * D}), "d_g20000229");  // a leap day
    EXPECT_EQ(generation_name("d", Span{366 * D, 367 * D}), "d_g20010101");
    EXPECT_LE(generation_name("wh_message_deduplication", Span{kDec2 + 6 * H, kDec2 + 12 * H}).size(), 63u);
}

TEST(GenerationSpan, UtcLiteralsForBounds) {
    EXPECT_EQ(utc_literal(kDec2), "2026-12-02 00:00:00.000000+00");
    EXPECT_EQ(utc_literal(kDec2 + 13 * H + 61 * 1000000LL + 7), "2026-12-02 13:01:01.000007+00");
    EXPECT_EQ(utc_literal(-1), "1999-12-31 23:59:59.999999+00");
}

TEST(GenerationSpan, HoldingAndCreating) {
    std::vector<Span> existing{{kDec2 - D, kDec2}, {kDec2, kDec2 + D}};
    EXPECT_EQ(span_holding(existing, kDec2 + 3 * H), (Span{kDec2, kDec2 + D}));
    EXPECT_EQ(span_holding(existing, kDec2 - 1), (Span{kDec2 - D, kDec2}));
    EXPECT_FALSE(span_holding(existing, kDec2 + D));
    EXPECT_FALSE(span_holding(existing, kDec2 - D - 1));
    EXPECT_EQ(span_for(existing, kDec2 + D + 5, D), (Span{kDec2 + D, kDec2 + 2 * D}));
    EXPECT_EQ(span_for(existing, kDec2 - 40 * D, D), (Span{kDec2 - 40 * D, kDec2 - 39 * D}));  // a backfill
}

TEST(GenerationSpan, ANewPeriodFillsTheGapsAndNeverOverlaps) {
    // Generations of 6 hours exist; the period becomes a day: the rest of the day is one span.
    std::vector<Span> existing{{kDec2, kDec2 + 6 * H}, {kDec2 + 6 * H, kDec2 + 12 * H}};
    EXPECT_EQ(span_for(existing, kDec2 + 13 * H, D), (Span{kDec2 + 12 * H, kDec2 + D}));
    // A day exists; the period becomes 6 hours: the next day in four spans.
    std::vector<Span> day{{kDec2, kDec2 + D}};
    std::vector<Span> made = spans_to_cover(day, kDec2 + 2 * H, kDec2 + 2 * D, 6 * H);
    ASSERT_EQ(made.size(), 4u);
    EXPECT_EQ(made.front(), (Span{kDec2 + D, kDec2 + D + 6 * H}));
    EXPECT_EQ(made.back(), (Span{kDec2 + D + 18 * H, kDec2 + 2 * D}));
    // A gap between two existing spans, shorter than a period: the gap exactly.
    std::vector<Span> gap{{kDec2, kDec2 + 5 * H}, {kDec2 + 7 * H, kDec2 + D}};
    EXPECT_EQ(span_for(gap, kDec2 + 6 * H, D), (Span{kDec2 + 5 * H, kDec2 + 7 * H}));
}

TEST(GenerationSpan, CoverAheadAndLeaveTheWindow) {
    std::vector<Span> made = spans_to_cover({}, kDec2 + 5 * H, kDec2 + 2 * D, D);
    ASSERT_EQ(made.size(), 2u);  // today and tomorrow (the end is exclusive)
    EXPECT_EQ(made[0], (Span{kDec2, kDec2 + D}));
    const std::int64_t retention = 30 * D;
    EXPECT_FALSE(left_window(made[0], kDec2 + 30 * D + D - 1, retention));
    EXPECT_TRUE(left_window(made[0], kDec2 + 31 * D, retention));
}

// A store's p_now against the window (issue 30 item 10): 30 days of one-day generations, the
// clock at 2026-12-02 10:00.
TEST(GenerationSpan, PlacementOfAStoresPNow) {
    const std::int64_t now = kDec2 + 10 * H, retention = 30 * D;
    const std::vector<Span> none;
    EXPECT_EQ(place(none, now, now, retention, D), Placement::inside);
    // Older: its day must end after now - 30 days (2026-11-02 10:00).
    EXPECT_EQ(place(none, kDec2 - 30 * D + 3 * H, now, retention, D), Placement::inside);  // Nov 2 ends Nov 3
    EXPECT_EQ(place(none, kDec2 - 31 * D + 23 * H, now, retention, D), Placement::expired);  // Nov 1 ended Nov 2 00:00
    EXPECT_EQ(place(none, kDec2 - 365 * D, now, retention, D), Placement::expired);
    // A generation that exists takes the record (maintenance made it at an earlier p_now).
    const std::vector<Span> old{{kDec2 - 40 * D, kDec2 - 39 * D}};
    EXPECT_EQ(place(old, kDec2 - 40 * D + H, now, retention, D), Placement::inside);
    EXPECT_EQ(place(old, kDec2 - 39 * D + H, now, retention, D), Placement::expired);
    // Ahead: the generation of now + one period (what maintenance makes ahead), no further.
    EXPECT_EQ(place(none, kDec2 + D + 23 * H, now, retention, D), Placement::inside);
    EXPECT_EQ(place(none, kDec2 + 2 * D, now, retention, D), Placement::too_far_ahead);
    EXPECT_EQ(place(none, kDec2 + 365 * D, now, retention, D), Placement::too_far_ahead);
    // ... unless it exists (maintenance run with a later p_now made it).
    const std::vector<Span> ahead{{kDec2 + 40 * D, kDec2 + 41 * D}};
    EXPECT_EQ(place(ahead, kDec2 + 40 * D + H, now, retention, D), Placement::inside);
    EXPECT_EQ(place(ahead, kDec2 + 41 * D + H, now, retention, D), Placement::too_far_ahead);
}

}  // namespace
}  // namespace whizbang::core::generations

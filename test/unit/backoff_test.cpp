#include "backoff.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace whizbang::core {
namespace {

constexpr std::int64_t kSecond = 1000000;

TEST(Backoff, DoublesPerAttemptUpToTheCap) {
    EXPECT_EQ(retry_delay_us(1, 30, 300, 1.0), 30 * kSecond);
    EXPECT_EQ(retry_delay_us(2, 30, 300, 1.0), 60 * kSecond);
    EXPECT_EQ(retry_delay_us(3, 30, 300, 1.0), 120 * kSecond);
    EXPECT_EQ(retry_delay_us(4, 30, 300, 1.0), 240 * kSecond);
    EXPECT_EQ(retry_delay_us(5, 30, 300, 1.0), 300 * kSecond);
    EXPECT_EQ(retry_delay_us(1000, 30, 300, 1.0), 300 * kSecond);
}

TEST(Backoff, JitterStaysWithinThreeQuartersAndOne) {
    EXPECT_EQ(retry_delay_us(1, 40, 300, 0.0), 30 * kSecond);
    for (double r = 0.0; r < 1.0; r += 0.01) {
        std::int64_t d = retry_delay_us(2, 40, 300, r);
        EXPECT_GE(d, 60 * kSecond);
        EXPECT_LE(d, 80 * kSecond);
    }
}

TEST(Backoff, JitterOfAPolicy) {
    // No jitter: the delay exactly, whatever the random draw.
    EXPECT_EQ(retry_delay_us(2, 40, 300, 0.0, 0), 80 * kSecond);
    EXPECT_EQ(retry_delay_us(2, 40, 300, 0.9, 0), 80 * kSecond);
    // All jitter: anywhere in [0, delay].
    EXPECT_EQ(retry_delay_us(2, 40, 300, 0.0, 100), 0);
    EXPECT_EQ(retry_delay_us(2, 40, 300, 0.5, 100), 40 * kSecond);
    // Half: [delay / 2, delay]; out-of-range percentages are clamped.
    EXPECT_EQ(retry_delay_us(1, 40, 300, 0.0, 50), 20 * kSecond);
    EXPECT_EQ(retry_delay_us(1, 40, 300, 0.0, 250), 0);
    EXPECT_EQ(retry_delay_us(1, 40, 300, 0.0, -3), 40 * kSecond);
    // The default is DESIGN's [0.75, 1.0].
    EXPECT_EQ(retry_delay_us(1, 40, 300, 0.0, kDefaultJitterPercent), retry_delay_us(1, 40, 300, 0.0));
}

TEST(Backoff, EdgeInputs) {
    EXPECT_EQ(retry_delay_us(0, 30, 300, 1.0), 30 * kSecond);   // attempts < 1 counts as 1
    EXPECT_EQ(retry_delay_us(-5, 30, 300, 1.0), 30 * kSecond);
    EXPECT_EQ(retry_delay_us(3, 0, 300, 1.0), 0);                // no base: retry at once
    EXPECT_EQ(retry_delay_us(3, 30, 0, 1.0), 0);                 // cap of zero
    EXPECT_EQ(retry_delay_us(64, INT64_MAX / 2, INT64_MAX / 4, 1.0) > 0, true);  // no overflow
}

}  // namespace
}  // namespace whizbang::core

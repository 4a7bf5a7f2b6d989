#include "delivery_verdict.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace whizbang::core {
namespace {

TEST(HttpStatusDelivery, TwoHundredsAreAcknowledged) {
    for (long s : {200L, 201L, 202L, 204L, 299L}) EXPECT_EQ(http_status_delivery(s), Delivery::kAcknowledged) << s;
}

TEST(HttpStatusDelivery, TimeoutsThrottlingAndServerErrorsAreRetried) {
    for (long s : {408L, 429L, 500L, 502L, 503L, 504L, 599L}) EXPECT_EQ(http_status_delivery(s), Delivery::kRetry) << s;
}

TEST(HttpStatusDelivery, OtherClientErrorsRedirectsAndOddAnswersAreRefused) {
    for (long s : {400L, 401L, 403L, 404L, 409L, 413L, 422L, 499L, 100L, 199L, 301L, 302L, 307L, 0L, 600L, -1L}) {
        EXPECT_EQ(http_status_delivery(s), Delivery::kRefused) << s;
    }
}

TEST(RetryAfter, DelaySecondsWithWhitespace) {
    EXPECT_EQ(parse_retry_after_seconds("0", 600), 0);
    EXPECT_EQ(parse_retry_after_seconds("7", 600), 7);
    EXPECT_EQ(parse_retry_after_seconds("  120\t", 600), 120);
}

TEST(RetryAfter, CutToTheMaximumWithoutOverflow) {
    EXPECT_EQ(parse_retry_after_seconds("601", 600), 600);
    EXPECT_EQ(parse_retry_after_seconds("99999999999999999999999999", 600), 600);
}

TEST(RetryAfter, DatesAndGarbageAreNotDelays) {
    EXPECT_EQ(parse_retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT", 600), std::nullopt);
    EXPECT_EQ(parse_retry_after_seconds("", 600), std::nullopt);
    EXPECT_EQ(parse_retry_after_seconds("   ", 600), std::nullopt);
    EXPECT_EQ(parse_retry_after_seconds("-1", 600), std::nullopt);
    EXPECT_EQ(parse_retry_after_seconds("1.5", 600), std::nullopt);
    EXPECT_EQ(parse_retry_after_seconds("1 2", 600), std::nullopt);
}

TEST(AmqpReplyCode, ShutdownAndResourceTroubleAreTransient) {
    for (int c : {320, 405, 506, 541}) EXPECT_TRUE(amqp_reply_code_transient(c)) << c;
}

TEST(AmqpReplyCode, ConfigurationAndProtocolErrorsAreNot) {
    for (int c : {200, 311, 312, 313, 402, 403, 404, 406, 501, 502, 503, 504, 505, 530, 540}) {
        EXPECT_FALSE(amqp_reply_code_transient(c)) << c;
    }
}

}  // namespace
}  // namespace whizbang::core

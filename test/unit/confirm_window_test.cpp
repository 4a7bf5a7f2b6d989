#include "confirm_window.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace whizbang::core {
namespace {

using Ids = std::vector<std::string>;

TEST(ConfirmWindow, TagsCountFromOne) {
    ConfirmWindow w;
    EXPECT_TRUE(w.settled());
    EXPECT_EQ(w.published("a"), 1u);
    EXPECT_EQ(w.published("b"), 2u);
    EXPECT_EQ(w.outstanding(), 2u);
    EXPECT_FALSE(w.settled());
}

TEST(ConfirmWindow, SingleAcksInAnyOrder) {
    ConfirmWindow w;
    for (auto id : {"a", "b", "c"}) w.published(id);
    EXPECT_EQ(w.ack(2, false), 1u);
    EXPECT_EQ(w.ack(3, false), 1u);
    EXPECT_FALSE(w.settled());
    EXPECT_EQ(w.ack(1, false), 1u);
    EXPECT_TRUE(w.settled());
}

TEST(ConfirmWindow, MultipleSettlesEverythingUpToTheTag) {
    ConfirmWindow w;
    for (auto id : {"a", "b", "c", "d"}) w.published(id);
    EXPECT_EQ(w.ack(2, false), 1u);
    EXPECT_EQ(w.ack(3, true), 2u);  // 1 and 3; 2 was already settled
    EXPECT_EQ(w.outstanding(), 1u);
    EXPECT_EQ(w.ack(0, true), 1u);  // zero with multiple: all outstanding
    EXPECT_TRUE(w.settled());
}

TEST(ConfirmWindow, RepeatedOrUnknownAcksSettleNothingElse) {
    ConfirmWindow w;
    w.published("a");
    w.published("b");
    EXPECT_EQ(w.ack(1, false), 1u);
    EXPECT_EQ(w.ack(1, false), 0u);
    EXPECT_EQ(w.ack(7, false), 0u);
    EXPECT_EQ(w.ack(0, false), 0u);
    EXPECT_EQ(w.outstanding(), 1u);
}

TEST(ConfirmWindow, NackNamesTheRefusedMessages) {
    ConfirmWindow w;
    for (auto id : {"a", "b", "c"}) w.published(id);
    EXPECT_EQ(w.nack(2, false), (Ids{"b"}));
    EXPECT_EQ(w.nack(3, true), (Ids{"a", "c"}));
    EXPECT_TRUE(w.settled());
    EXPECT_EQ(w.nack(3, true), Ids{});
}

TEST(ConfirmWindow, TagsKeepGrowingAfterSettling) {
    ConfirmWindow w;
    w.published("a");
    w.ack(1, false);
    EXPECT_EQ(w.published("b"), 2u);  // the broker's numbering does not restart per flush
    EXPECT_EQ(w.ack(1, true), 0u);
    EXPECT_FALSE(w.settled());
}

}  // namespace
}  // namespace whizbang::core

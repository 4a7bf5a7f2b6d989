#include "excerpt.h"

#include <gtest/gtest.h>

#include <string>

namespace whizbang::core {
namespace {

TEST(Excerpt, ShortTextIsQuotedWhole) {
    EXPECT_EQ(quoted_excerpt(""), "\"\"");
    EXPECT_EQ(quoted_excerpt("nope"), "\"nope\"");
    const std::string exactly(kMaxEchoChars, 'x');
    EXPECT_EQ(quoted_excerpt(exactly), "\"" + exactly + "\"");
}

TEST(Excerpt, LongTextIsCutWithItsSize) {
    const std::string big(10 * 1024 * 1024, 'a');
    const std::string out = quoted_excerpt(big);
    EXPECT_EQ(out, "\"" + std::string(kMaxEchoChars, 'a') + "...\" (10485760 bytes)");
    EXPECT_EQ(quoted_excerpt(std::string(kMaxEchoChars + 1, 'b')),
              "\"" + std::string(kMaxEchoChars, 'b') + "...\" (65 bytes)");
}

TEST(Excerpt, CountsCharactersNotBytesAndNeverSplitsOne) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "\xc3\xa9";  // é, two bytes
    std::string expected = "\"";
    for (std::size_t i = 0; i < kMaxEchoChars; ++i) expected += "\xc3\xa9";
    EXPECT_EQ(quoted_excerpt(text), expected + "...\" (200 bytes)");
    // A four-byte character straddling the cut is kept whole or left out whole.
    std::string mixed(kMaxEchoChars - 1, 'a');
    mixed += "\xf0\x9f\x98\x80";  // U+1F600
    mixed += "tail";
    EXPECT_EQ(quoted_excerpt(mixed), "\"" + std::string(kMaxEchoChars - 1, 'a') + "\xf0\x9f\x98\x80" + "...\" (71 bytes)");
}

}  // namespace
}  // namespace whizbang::core

#include "uri_parts.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace whizbang::core {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(SplitQuery, BaseAndQuery) {
    auto s = split_query("amqp://u:p@h:5672/vh?exchange=orders&x=1");
    EXPECT_EQ(s.base, "amqp://u:p@h:5672/vh");
    EXPECT_EQ(s.query, "exchange=orders&x=1");
}

TEST(SplitQuery, NoQueryAndFragments) {
    EXPECT_EQ(split_query("amqp://h/").base, "amqp://h/");
    EXPECT_EQ(split_query("amqp://h/").query, "");
    EXPECT_EQ(split_query("amqp://h/?a=1#frag").query, "a=1");
    EXPECT_EQ(split_query("amqp://h/#frag?a=1").base, "amqp://h/");
    EXPECT_EQ(split_query("amqp://h/#frag?a=1").query, "");
    EXPECT_EQ(split_query("amqp://h/?").query, "");
    EXPECT_EQ(split_query("amqp://h/?a=1?b=2").query, "a=1?b=2");
}

TEST(PercentDecode, DecodesAndKeepsPlus) {
    EXPECT_EQ(percent_decode("a%2Fb%2fc"), "a/b/c");
    EXPECT_EQ(percent_decode("a+b"), "a+b");
    EXPECT_EQ(percent_decode("%C3%A9"), "\xC3\xA9");
    EXPECT_EQ(percent_decode(""), "");
}

TEST(PercentDecode, RejectsBrokenEscapes) {
    EXPECT_EQ(percent_decode("%"), std::nullopt);
    EXPECT_EQ(percent_decode("%4"), std::nullopt);
    EXPECT_EQ(percent_decode("ab%"), std::nullopt);
    EXPECT_EQ(percent_decode("%zz"), std::nullopt);
    EXPECT_EQ(percent_decode("%4g"), std::nullopt);
}

TEST(ParseQuery, PairsInOrderDecoded) {
    EXPECT_EQ(parse_query("exchange=my%20ex&&flag&b="), (Pairs{{"exchange", "my ex"}, {"flag", ""}, {"b", ""}}));
    EXPECT_EQ(parse_query(""), Pairs{});
    EXPECT_EQ(parse_query("a=1=2"), (Pairs{{"a", "1=2"}}));
    EXPECT_EQ(parse_query("a=%"), std::nullopt);
}

TEST(RedactPassword, HidesOnlyThePassword) {
    EXPECT_EQ(redact_password("amqp://user:secret@host:5672/vh?exchange=x"), "amqp://user:***@host:5672/vh?exchange=x");
    EXPECT_EQ(redact_password("https://a:b@example.com/hook"), "https://a:***@example.com/hook");
    // An '@' inside the password (unescaped): the last '@' of the authority ends the userinfo.
    EXPECT_EQ(redact_password("amqp://u:p@ss@host/"), "amqp://u:***@host/");
    EXPECT_EQ(redact_password("amqp://user@host/"), "amqp://user@host/");
    EXPECT_EQ(redact_password("amqp://host/path@x:y"), "amqp://host/path@x:y");
    EXPECT_EQ(redact_password("http://host:8080/"), "http://host:8080/");
    EXPECT_EQ(redact_password("ndjson:-"), "ndjson:-");
}

TEST(HeaderValueEscape, PlainAsciiUnchanged) {
    EXPECT_EQ(header_value_escape("orders.created, MyApp v1 (x=1)"), "orders.created, MyApp v1 (x=1)");
}

TEST(HeaderValueEscape, NoHeaderInjectionAndReversible) {
    EXPECT_EQ(header_value_escape("a\r\nX-Evil: 1"), "a%0D%0AX-Evil: 1");
    EXPECT_EQ(header_value_escape("50%"), "50%25");
    EXPECT_EQ(header_value_escape("caf\xC3\xA9\x7f\t"), "caf%C3%A9%7F%09");
    for (const std::string& s : std::vector<std::string>{"a\r\nb", "50%", "caf\xC3\xA9", std::string("nul\0x", 5)}) {
        EXPECT_EQ(percent_decode(header_value_escape(s)), s);
    }
}

}  // namespace
}  // namespace whizbang::core

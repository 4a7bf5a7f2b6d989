// whizbang-relay's command line (src/core/relay_options.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error.h"
#include "relay_options.h"

namespace whizbang::core {
namespace {

std::string refusal(const std::vector<std::string>& args) {
    try {
        parse_relay_options(args);
    } catch (const InputError& e) {
        return e.what();
    }
    return "accepted";
}

TEST(RelayOptions, DefaultsAndBothSpellings) {
    auto o = parse_relay_options({"--slot", "s", "--sink=ndjson:-"});
    EXPECT_EQ(o.slot, "s");
    EXPECT_EQ(o.sink, "ndjson:-");
    EXPECT_EQ(o.publication, "whizbang_outbox");
    EXPECT_EQ(o.dbname, "");
    EXPECT_EQ(o.status_interval_s, 10);
    o = parse_relay_options({"--slot=a=b", "--sink", "ndjson:/x", "--publication", "p", "--dbname",
                             "host=h dbname=d", "--status-interval=3"});
    EXPECT_EQ(o.slot, "a=b");  // only the first '=' splits
    EXPECT_EQ(o.publication, "p");
    EXPECT_EQ(o.dbname, "host=h dbname=d");
    EXPECT_EQ(o.status_interval_s, 3);
}

TEST(RelayOptions, HelpAndVersionNeedNothingElse) {
    EXPECT_TRUE(parse_relay_options({"--help"}).help);
    EXPECT_TRUE(parse_relay_options({"--version"}).version);
}

TEST(RelayOptions, Refusals) {
    EXPECT_NE(refusal({"--sink", "ndjson:-"}).find("--slot is required"), std::string::npos);
    EXPECT_NE(refusal({"--slot", "s"}).find("--sink is required"), std::string::npos);
    EXPECT_NE(refusal({"--slot", "s", "--sink"}).find("--sink needs a value"), std::string::npos);
    EXPECT_NE(refusal({"--slot", "s", "--sink", "x", "--bogus", "1"}).find("unknown option --bogus"), std::string::npos);
    EXPECT_NE(refusal({"--slot", "s", "--sink", "x", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
    EXPECT_NE(refusal({"--slot=", "--sink", "x"}).find("--slot must not be empty"), std::string::npos);
    for (const char* bad : {"0", "3601", "-1", "1.5", "", "abc", "99999"})
        EXPECT_NE(refusal({"--slot", "s", "--sink", "x", std::string("--status-interval=") + bad}).find("--status-interval"),
                  std::string::npos)
            << bad;
}

TEST(RelayOptions, UsageNamesEveryOptionAndTheExitCodes) {
    const std::string u = relay_usage();
    for (const char* s : {"--slot", "--sink", "--publication", "--dbname", "--status-interval", "--help", "--version",
                          "Exit status", "5 slot invalidated"})
        EXPECT_NE(u.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace whizbang::core

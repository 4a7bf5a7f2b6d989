#include "counter_journal.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace whizbang::core {
namespace {

TEST(CounterJournal, SumsPerKeyAcrossLevels) {
    CounterJournal j;
    j.add(0, "a", Counter::stored, 3, 1);
    j.add(0, "a", Counter::stored, 2, 2);
    j.add(1, "", Counter::claimed, 5, 2);
    j.commit_sub(2);
    const auto sums = j.take();
    ASSERT_EQ(sums.size(), 2u);
    EXPECT_EQ(sums.at({0, "a"})[static_cast<std::size_t>(Counter::stored)], 5u);
    EXPECT_EQ(sums.at({1, ""})[static_cast<std::size_t>(Counter::claimed)], 5u);
    EXPECT_TRUE(j.empty());
}

TEST(CounterJournal, AnAbortedSubtransactionCountsNothing) {
    CounterJournal j;
    j.add(0, "a", Counter::completed, 1, 1);
    j.add(0, "a", Counter::completed, 10, 2);
    j.add(0, "b", Counter::failed, 7, 3);
    j.abort_sub(2);  // its child at level 3 went with it
    const auto sums = j.take();
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums.at({0, "a"})[static_cast<std::size_t>(Counter::completed)], 1u);
}

TEST(CounterJournal, ZeroIsNotAnEntry) {
    CounterJournal j;
    j.add(0, "a", Counter::stored, 0, 1);
    EXPECT_TRUE(j.empty());
}

// Random nesting against a plain model: a stack of per-level sums, merged into the parent on
// commit and dropped on abort. Whatever the interleaving, take() equals the model's bottom.
TEST(CounterJournal, RandomNestingMatchesTheModel) {
    std::mt19937 rng(20261207);
    for (int round = 0; round < 500; ++round) {
        CounterJournal j;
        std::vector<std::map<CounterKey, CounterValues>> model(1);
        for (int step = 0; step < 60; ++step) {
            const int level = static_cast<int>(model.size());
            switch (rng() % 5) {
                case 0:  // a subtransaction begins
                    if (level < 6) model.emplace_back();
                    break;
                case 1:  // the innermost commits
                    if (level > 1) {
                        j.commit_sub(level);
                        for (const auto& [k, v] : model.back())
                            for (std::size_t c = 0; c < kCounters; ++c) model[level - 2][k][c] += v[c];
                        model.pop_back();
                    }
                    break;
                case 2:  // the innermost aborts
                    if (level > 1) {
                        j.abort_sub(level);
                        model.pop_back();
                    }
                    break;
                default: {
                    const int source = static_cast<int>(rng() % 2);
                    const std::string consumer = source == 1 ? "" : std::string(1, static_cast<char>('a' + rng() % 3));
                    const auto counter = static_cast<Counter>(rng() % kCounters);
                    const std::uint64_t n = rng() % 4;
                    j.add(source, consumer, counter, n, level);
                    if (n > 0) model.back()[{source, consumer}][static_cast<std::size_t>(counter)] += n;
                }
            }
        }
        while (model.size() > 1) {  // the rest commits, innermost first
            const int level = static_cast<int>(model.size());
            j.commit_sub(level);
            for (const auto& [k, v] : model.back())
                for (std::size_t c = 0; c < kCounters; ++c) model[level - 2][k][c] += v[c];
            model.pop_back();
        }
        ASSERT_EQ(j.take(), model.front()) << "round " << round;
    }
}

}  // namespace
}  // namespace whizbang::core

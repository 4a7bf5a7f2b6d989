#include "uuid.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>

#include "error.h"

namespace whizbang::core {
namespace {

using Random = std::array<std::uint8_t, 10>;

Random random_bytes(std::mt19937_64& rng) {
    Random r{};
    for (auto& b : r) b = static_cast<std::uint8_t>(rng());
    return r;
}

std::int64_t timestamp_of(const Uuid& u) {
    std::int64_t ms = 0;
    for (int i = 0; i < 6; ++i) ms = ms << 8 | u[i];
    return ms;
}

void expect_v7_bits(const Uuid& u) {
    EXPECT_EQ(u[6] >> 4, 7) << to_string(u);
    EXPECT_EQ(u[8] >> 6, 2) << to_string(u);
}

TEST(Uuid, ToStringAndNamespace) {
    EXPECT_EQ(to_string(kUrlNamespace), "6ba7b811-9dad-11d1-80b4-00c04fd430c8");
    EXPECT_EQ(to_string(Uuid{}), "00000000-0000-0000-0000-000000000000");
}

// Expected values from Python: uuid.uuid5(uuid.NAMESPACE_URL, name).
TEST(Uuid, V5KnownVectors) {
    EXPECT_EQ(to_string(uuid_v5(kUrlNamespace, "https://example.com/")), "dd2c1780-811a-5296-81c5-178a0ef488bc");
    EXPECT_EQ(to_string(uuid_v5(kUrlNamespace, "23:https://example.com/src42")),
              "6c29351e-7abc-5c56-9add-9492dd3b08f4");
}

TEST(Uuid, EventUuidPrefixesSourceLength) {
    EXPECT_EQ(to_string(event_uuid("https://example.com/src", "42")), "6c29351e-7abc-5c56-9add-9492dd3b08f4");
    EXPECT_EQ(to_string(event_uuid("a", "b")), "62aae63b-6fe1-5058-b674-9f2be9f58a0d");  // name "1:ab"
    EXPECT_NE(event_uuid("ab", "c"), event_uuid("a", "bc"));
}

TEST(UuidV7, VersionVariantAndTimestampBytes) {
    UuidV7Generator gen;
    Random ones;
    ones.fill(0xff);
    const Uuid u = gen.next(0x0123456789ab, ones);
    EXPECT_EQ(to_string(u), "01234567-89ab-7fff-bfff-ffffffffffff");

    UuidV7Generator gen2;
    const Uuid z = gen2.next(1700000000000, Random{});
    EXPECT_EQ(timestamp_of(z), 1700000000000);
    EXPECT_EQ(to_string(z).substr(14), "7000-8000-000000000000");

    UuidV7Generator gen3;
    const Random r = {0xa5, 0x5a, 0xc3, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_EQ(to_string(gen3.next(1, r)), "00000000-0001-755a-8301-020304050607");
}

TEST(UuidV7, TimestampRange) {
    UuidV7Generator gen;
    EXPECT_EQ(timestamp_of(gen.next(-5, Random{})), 0);
    UuidV7Generator gen2;
    const std::int64_t max_ms = (std::int64_t{1} << 48) - 1;
    EXPECT_EQ(timestamp_of(gen2.next(max_ms, Random{})), max_ms);
    UuidV7Generator gen3;
    try {
        gen3.next(max_ms + 1, Random{});
        FAIL() << "expected out_of_range";
    } catch (const InputError& e) {
        EXPECT_EQ(e.kind(), InputError::Kind::out_of_range);
    }
}

TEST(UuidV7, StrictlyIncreasingWithinOneMillisecond) {
    std::mt19937_64 rng(42);
    UuidV7Generator gen;
    Uuid prev = gen.next(1700000000000, random_bytes(rng));
    for (int i = 0; i < 10000; ++i) {
        const Uuid u = gen.next(1700000000000, random_bytes(rng));
        ASSERT_LT(prev, u) << i;
        expect_v7_bits(u);
        prev = u;
    }
}

TEST(UuidV7, IncreasingAcrossMilliseconds) {
    std::mt19937_64 rng(7);
    UuidV7Generator gen;
    Uuid prev = gen.next(1000, random_bytes(rng));
    for (std::int64_t ms = 1001; ms < 1100; ++ms) {
        for (int i = 0; i < 3; ++i) {
            const Uuid u = gen.next(ms, random_bytes(rng));
            ASSERT_LT(prev, u);
            EXPECT_EQ(timestamp_of(u), ms);
            prev = u;
        }
    }
}

TEST(UuidV7, SmallBackwardStepKeepsOrder) {
    std::mt19937_64 rng(1);
    UuidV7Generator gen;
    const Uuid a = gen.next(50000, random_bytes(rng));
    const Uuid b = gen.next(49990, random_bytes(rng));
    const Uuid c = gen.next(50000 - UuidV7Generator::kMaxBackwardMs + 1, random_bytes(rng));
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    EXPECT_EQ(timestamp_of(c), 50000);
    expect_v7_bits(c);
}

TEST(UuidV7, LargeBackwardJumpIsHonoured) {
    std::mt19937_64 rng(2);
    UuidV7Generator gen;
    const Uuid a = gen.next(50000, random_bytes(rng));
    const Uuid b = gen.next(50000 - UuidV7Generator::kMaxBackwardMs, random_bytes(rng));
    EXPECT_EQ(timestamp_of(b), 40000);
    EXPECT_LT(b, a);
    // From there on the generator is monotonic again.
    const Uuid c = gen.next(40000, random_bytes(rng));
    EXPECT_LT(b, c);
}

TEST(UuidV7, IncrementCarriesFromRandBIntoRandA) {
    UuidV7Generator gen;
    // rand_a = 0, rand_b = all ones.
    const Random r = {0x00, 0x00, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    EXPECT_EQ(to_string(gen.next(1, r)), "00000000-0001-7000-bfff-ffffffffffff");
    EXPECT_EQ(to_string(gen.next(1, r)), "00000000-0001-7001-8000-000000000000");
    EXPECT_EQ(to_string(gen.next(1, r)), "00000000-0001-7001-8000-000000000001");
}

TEST(UuidV7, CounterOverflowBorrowsNextMillisecond) {
    UuidV7Generator gen;
    Random ones;
    ones.fill(0xff);
    const Uuid full = gen.next(1000, ones);
    const Random fresh = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a};
    const Uuid next = gen.next(1000, fresh);
    EXPECT_LT(full, next);
    EXPECT_EQ(timestamp_of(next), 1001);
    expect_v7_bits(next);
    // The real clock is still at 1000: keep counting on the borrowed millisecond.
    const Uuid after = gen.next(1000, fresh);
    EXPECT_LT(next, after);
    EXPECT_EQ(timestamp_of(after), 1001);
}

}  // namespace
}  // namespace whizbang::core

namespace whizbang::core {
namespace {

TEST(ParseUuid, AcceptsTheFormsOfUuidIn) {
    const auto expected = parse_uuid("6c29351e-7abc-5c56-9add-9492dd3b08f4");
    ASSERT_TRUE(expected.has_value());
    EXPECT_EQ(to_string(*expected), "6c29351e-7abc-5c56-9add-9492dd3b08f4");
    EXPECT_EQ(parse_uuid("6C29351E-7ABC-5C56-9ADD-9492DD3B08F4"), expected);
    EXPECT_EQ(parse_uuid("6c29351e7abc5c569add9492dd3b08f4"), expected);
    EXPECT_EQ(parse_uuid("{6c29351e-7abc-5c56-9add-9492dd3b08f4}"), expected);
    EXPECT_EQ(parse_uuid("6c29-351e-7abc-5c56-9add-9492-dd3b-08f4"), expected);
}

TEST(ParseUuid, RejectsEverythingElse) {
    for (const char* bad : {"", "6c29351e-7abc-5c56-9add-9492dd3b08f", "6c29351e-7abc-5c56-9add-9492dd3b08f44",
                            "-6c29351e7abc5c569add9492dd3b08f4", "6c29351e7abc5c569add9492dd3b08f4-",
                            "6c29351e--7abc5c569add9492dd3b08f4", "6c2-9351e7abc5c569add9492dd3b08f4",
                            "6c29351e-7abc-5c56-9add-9492dd3b08g4", "{6c29351e7abc5c569add9492dd3b08f4",
                            "not a uuid"})
        EXPECT_FALSE(parse_uuid(bad).has_value()) << bad;
}

}  // namespace
}  // namespace whizbang::core

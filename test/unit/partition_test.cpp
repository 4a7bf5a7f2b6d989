#include "partition.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <random>

#include "error.h"

namespace whizbang::core {
namespace {

Uuid parse(const char* hex32) {
    Uuid u{};
    for (int i = 0; i < 16; ++i) {
        auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
        u[i] = static_cast<std::uint8_t>(nibble(hex32[2 * i]) << 4 | nibble(hex32[2 * i + 1]));
    }
    return u;
}

// Stored partition numbers depend on these: the values were computed by an independent Python
// implementation of FNV-1a 64 + fmix64 and must never change.
TEST(Partition, StreamHashIsStable) {
    EXPECT_EQ(stream_hash(parse("00000000000000000000000000000000")), -1511990362);
    EXPECT_EQ(stream_hash(parse("ffffffffffffffffffffffffffffffff")), -1182459859);
    EXPECT_EQ(stream_hash(parse("018f3a2b7c4d7e5f8a6b1c2d3e4f5a6b")), -1888553499);
    EXPECT_EQ(stream_hash(parse("6c29351e7abc5c569add9492dd3b08f4")), 258075218);
}

TEST(Partition, AlwaysInRange) {
    std::mt19937_64 rng(123);
    for (int count : {1, 2, 7, 10000, INT_MAX}) {
        for (int i = 0; i < 20000; ++i) {
            Uuid u{};
            for (auto& b : u) b = static_cast<std::uint8_t>(rng());
            const int p = partition_of(u, count);
            ASSERT_GE(p, 0);
            ASSERT_LT(p, count);
            ASSERT_EQ(p, partition_of_hash(stream_hash(u), count));
        }
    }
}

TEST(Partition, FloorModuloOfExtremeHashes) {
    // Expected values are Python's floor modulo: -2**31 % n.
    EXPECT_EQ(partition_of_hash(INT32_MIN, 1), 0);
    EXPECT_EQ(partition_of_hash(INT32_MIN, 2), 0);
    EXPECT_EQ(partition_of_hash(INT32_MIN, 3), 1);
    EXPECT_EQ(partition_of_hash(INT32_MIN, 7), 5);
    EXPECT_EQ(partition_of_hash(INT32_MIN, 10), 2);
    EXPECT_EQ(partition_of_hash(INT32_MIN, 10000), 6352);
    EXPECT_EQ(partition_of_hash(INT32_MIN, INT32_MAX), 2147483646);
    EXPECT_EQ(partition_of_hash(INT32_MAX, INT32_MAX), 0);
    EXPECT_EQ(partition_of_hash(-1, 7), 6);
    EXPECT_EQ(partition_of_hash(13, 7), 6);
}

TEST(Partition, RejectsCountBelowOne) {
    for (int count : {0, -1, INT_MIN}) {
        try {
            partition_of_hash(5, count);
            FAIL() << "expected invalid_parameter for count " << count;
        } catch (const InputError& e) {
            EXPECT_EQ(e.kind(), InputError::Kind::invalid_parameter);
        }
        EXPECT_THROW(partition_of(Uuid{}, count), InputError);
    }
}

TEST(Partition, SpreadsSequentialUuids) {
    // UUIDv7 values of one millisecond differ only in their last bytes; they must still spread.
    int hits[8] = {};
    Uuid u = parse("018f3a2b7c4d70008000000000000000");
    for (int i = 0; i < 8000; ++i) {
        u[15] = static_cast<std::uint8_t>(i);
        u[14] = static_cast<std::uint8_t>(i >> 8);
        ++hits[partition_of(u, 8)];
    }
    for (int h : hits) {
        EXPECT_GT(h, 800);
        EXPECT_LT(h, 1200);
    }
}

}  // namespace
}  // namespace whizbang::core

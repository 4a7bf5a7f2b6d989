// Membership filter of a sealed dedup generation (issue 31 item 3, DESIGN §3.6 "Generations"):
// a Bloom filter over the generation's keys (message_id, consumer), the LSM-tree answer to "is
// this id in that immutable run?". A store asks it before looking a new id up in the
// generation's index; "absent" is certain (no false negatives), "maybe" costs the look-up.
//
// Sized at kBitsPerKey bits per key with kHashes bits set per key. Blocked (Putze, Sanders,
// Singler): a key's bits all lie in one block of 512 bits, one 64-byte cache line, chosen by one
// half of a 128-bit hash of the key, the bits inside it by the other half; a look-up then costs
// one cache miss instead of seven, for about 1% false positives instead of 0.8% (measured in
// test/unit/membership_filter_test.cpp). The bits are 64-bit words, bit i of the filter being
// bit (i % 64) of word i / 64 (whizbang.wh_dedup_filters.bits holds the words in the server's
// byte order: it is read back by the same server, or a restore onto the same kind).
//
// Pure and allocation-free where the server calls it (may_contain, add work on the caller's
// words), so PostgreSQL-side code may call it between palloc'd buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core::filter {

constexpr int kBitsPerKey = 10;
constexpr int kHashes = 7;
constexpr unsigned kBlockBits = 512;

// One key's hash: the two halves of the double hashing.
struct KeyHash {
    std::uint64_t h1;
    std::uint64_t h2;
};

// The hash of a dedup key: the 16 bytes of the message id and the consumer's bytes.
KeyHash key_hash(const unsigned char* message_id16, std::string_view consumer) noexcept;

// Bits of a filter for `keys` keys: kBitsPerKey per key, rounded up to whole blocks, at least
// one block.
std::uint64_t bits_for(std::uint64_t keys) noexcept;
inline std::size_t words_for(std::uint64_t bits) noexcept { return static_cast<std::size_t>((bits + 63) / 64); }

// Sets the key's bits in `words` (a filter of `bits` bits, bits > 0).
void add(std::uint64_t* words, std::uint64_t bits, const KeyHash& h) noexcept;

// False: the key was never added (certain). True: it may have been (or a false positive).
bool may_contain(const std::uint64_t* words, std::uint64_t bits, const KeyHash& h) noexcept;

}  // namespace whizbang::core::filter

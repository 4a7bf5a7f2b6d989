#include "membership_filter.h"

namespace whizbang::core::filter {
namespace {

// MurmurHash3's 64-bit finalizer: every input bit flips each output bit with probability ~1/2.
std::uint64_t mix(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

std::uint64_t load64(const unsigned char* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The key's block: h1 reduced to [0, blocks) by multiply-shift instead of a division
// (Lemire's fast range reduction).
std::uint64_t block_of(const KeyHash& h, std::uint64_t bits) noexcept {
    const std::uint64_t blocks = bits / kBlockBits;
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(h.h1) * blocks) >> 64);
}

// The i-th bit of the key inside its block: 9 bits of h2 each (7 * 9 = 63 bits of it).
unsigned bit_in_block(const KeyHash& h, int i) noexcept {
    return static_cast<unsigned>((h.h2 >> (9 * i)) & (kBlockBits - 1));
}

}  // namespace

KeyHash key_hash(const unsigned char* message_id16, std::string_view consumer) noexcept {
    // The consumer first (FNV-1a over its bytes), then the id's two halves mixed in: v7 ids share
    // their time prefix within a generation, so every id bit must reach every hash bit.
    std::uint64_t c = 0xcbf29ce484222325ULL;
    for (unsigned char ch : consumer) c = (c ^ ch) * 0x100000001b3ULL;
    const std::uint64_t a = load64(message_id16), b = load64(message_id16 + 8);
    const std::uint64_t h1 = mix(a ^ mix(b ^ c));
    const std::uint64_t h2 = mix(b + 0x9e3779b97f4a7c15ULL * (a ^ mix(c + 1)));
    return KeyHash{h1, h2};
}

std::uint64_t bits_for(std::uint64_t keys) noexcept {
    const std::uint64_t bits = (keys == 0 ? 1 : keys) * static_cast<std::uint64_t>(kBitsPerKey);
    return (bits + kBlockBits - 1) / kBlockBits * kBlockBits;
}

void add(std::uint64_t* words, std::uint64_t bits, const KeyHash& h) noexcept {
    std::uint64_t* block = words + block_of(h, bits) * (kBlockBits / 64);
    for (int i = 0; i < kHashes; ++i) {
        const unsigned p = bit_in_block(h, i);
        block[p >> 6] |= std::uint64_t{1} << (p & 63);
    }
}

bool may_contain(const std::uint64_t* words, std::uint64_t bits, const KeyHash& h) noexcept {
    const std::uint64_t* block = words + block_of(h, bits) * (kBlockBits / 64);
    for (int i = 0; i < kHashes; ++i) {
        const unsigned p = bit_in_block(h, i);
        if ((block[p >> 6] & (std::uint64_t{1} << (p & 63))) == 0) return false;
    }
    return true;
}

}  // namespace whizbang::core::filter

#include "partition.h"

#include <string>

#include "error.h"

namespace whizbang::core {

std::int32_t stream_hash(const Uuid& stream) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (std::uint8_t byte : stream) {
        h ^= byte;
        h *= 0x100000001b3ULL;
    }
    // FNV-1a alone mixes the last bytes poorly into the high bits; UUIDv7 values of one
    // millisecond differ mostly at the end, so the Murmur finaliser spreads them out.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    // Two's-complement reinterpretation (well defined since C++20, and what every compiler does).
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(h >> 32));
}

int partition_of_hash(std::int32_t hash, int count) {
    if (count < 1) {
        throw InputError(InputError::Kind::invalid_parameter,
                         "partition count must be at least 1, got " + std::to_string(count));
    }
    // 64-bit arithmetic so INT32_MIN and INT32_MAX counts cannot overflow.
    std::int64_t r = static_cast<std::int64_t>(hash) % count;
    if (r < 0) r += count;
    return static_cast<int>(r);
}

int partition_of(const Uuid& stream, int count) { return partition_of_hash(stream_hash(stream), count); }

}  // namespace whizbang::core

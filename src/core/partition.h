// Stream partitioning: partition_of(stream, count) in [0, count).
#pragma once

#include <cstdint>

#include "no_postgres.h"
#include "uuid.h"

namespace whizbang::core {

// Stable 32-bit hash of the 16 uuid bytes: FNV-1a 64 over the bytes, then the MurmurHash3
// 64-bit finaliser, then the high 32 bits read as a signed integer. Never changes: stored
// partition numbers depend on it.
std::int32_t stream_hash(const Uuid& stream);

// Floor modulo: non-negative for every hash, INT32_MIN included (abs() would overflow there).
// Throws InputError(invalid_parameter) when count < 1.
int partition_of_hash(std::int32_t hash, int count);

int partition_of(const Uuid& stream, int count);

}  // namespace whizbang::core

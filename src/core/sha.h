// SHA-1 and SHA-256 (FIPS 180-4). Used for UUIDv5 names and payload fingerprints.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core {

using Sha1Digest = std::array<std::uint8_t, 20>;
using Sha256Digest = std::array<std::uint8_t, 32>;

Sha1Digest sha1(std::string_view data);
Sha256Digest sha256(std::string_view data);

}  // namespace whizbang::core

// Shared by the unit tests: hex rendering of digests and UUIDs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace whizbang::test {

template <typename Bytes>
std::string hex(const Bytes& bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (std::uint8_t b : bytes) {
        out += kHex[b >> 4];
        out += kHex[b & 0x0f];
    }
    return out;
}

}  // namespace whizbang::test

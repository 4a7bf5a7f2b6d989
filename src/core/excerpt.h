// Echoing client input in error messages, bounded: an invalid 10 MB value must not make a
// 10 MB error message and log line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core {

// Echoed input longer than this many characters is cut.
constexpr std::size_t kMaxEchoChars = 64;

// `text` in double quotes for an error message. Longer than kMaxEchoChars characters: its first
// kMaxEchoChars characters, then `..." (N bytes)`. Cut between UTF-8 sequences, never inside one.
std::string quoted_excerpt(std::string_view text);

}  // namespace whizbang::core

// Canonical JSON text for payload fingerprints (DESIGN §3.1, docs/fingerprint.md).
//
// Canonical form: object keys sorted by code point (byte order of UTF-8), no whitespace,
// strings escaped exactly as PostgreSQL's jsonb output escapes them, numbers as their value
// in plain decimal notation with fractional trailing zeros, leading zeros, exponents and a
// negative zero removed. Duplicate object keys keep the last value (as jsonb does).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "no_postgres.h"
#include "sha.h"

namespace whizbang::core {

// The deepest nesting of arrays and objects accepted, here and for every jsonb a whizbang
// function reads (envelopes, fingerprints): deeper input is refused with limit_exceeded (54000).
constexpr std::size_t kMaxJsonDepth = 10000;

// One ignore path in dotted form ("meta.traceId", "items.0.note"), split into segments.
// Throws InputError(invalid_parameter) for an empty path or an empty segment.
std::vector<std::string> split_dotted_path(std::string_view path);

// Canonical text of `json` with every path of `ignore_paths` removed.
// A segment addresses an object key; on an array a segment made of decimal digits addresses
// that element (removing it, as jsonb's #- does). A path that does not exist is ignored.
// Throws InputError(invalid_json) for malformed input.
std::string canonical_json(std::string_view json, const std::vector<std::string>& ignore_paths = {});

// Plain decimal form of one JSON number literal ("1.50" -> "1.5", "-0.0" -> "0", "1e3" -> "1000").
// Throws InputError(invalid_json) for a malformed literal, InputError(out_of_range) for an
// exponent beyond +/-100000.
std::string canonical_number(std::string_view literal);

// SHA-256 of canonical_json(json, ignore_paths).
Sha256Digest fingerprint(std::string_view json, const std::vector<std::string>& ignore_paths = {});

// The character a one-letter JSON escape stands for (\" \\ \/ \b \f \n \r \t), or 0 when `e` is no
// such letter (\u, or an invalid escape).
char json_simple_escape(char e);

// Appends code point `cp` (at most U+10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, std::uint32_t cp);

}  // namespace whizbang::core

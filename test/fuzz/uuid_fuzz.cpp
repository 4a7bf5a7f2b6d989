// Fuzz target: parse_uuid and the UUIDv5 names (src/core/uuid.h). parse_uuid must accept exactly
// what PostgreSQL's uuid_in accepts (MessageIds and StreamIds in JSON are read with it, and the
// server's own cast must agree): the reference below is uuid_in's loop (string_to_uuid in
// src/backend/utils/adt/uuid.c, PostgreSQL 15) transcribed. Also checks that text and value
// round-trip, and that event_uuid (input split in two) yields a version 5, variant 10 UUID.
#include <cctype>
#include <optional>
#include <string>

#include "fuzz_check.h"
#include "uuid.h"

namespace {

using whizbang::core::Uuid;

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<Uuid> postgres_uuid_in(std::string_view s) {
    std::size_t p = 0;
    auto at = [&](std::size_t k) { return k < s.size() ? s[k] : '\0'; };  // C string semantics
    const bool braces = at(p) == '{';
    if (braces) ++p;
    Uuid u{};
    for (std::size_t i = 0; i < u.size(); ++i) {
        const int hi = hex_value(at(p)), lo = hex_value(at(p + 1));
        if (hi < 0 || lo < 0) return std::nullopt;
        u[i] = static_cast<std::uint8_t>(hi << 4 | lo);
        p += 2;
        if (at(p) == '-' && i % 2 == 1 && i < u.size() - 1) ++p;
    }
    if (braces) {
        if (at(p) != '}') return std::nullopt;
        ++p;
    }
    // uuid_in reads a C string: the text must end here (an embedded NUL cannot reach it).
    if (p != s.size()) return std::nullopt;
    return u;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = whizbang::fuzz::as_text(data, size);
    const auto parsed = whizbang::core::parse_uuid(text);
    FUZZ_CHECK(parsed == postgres_uuid_in(text), "parse_uuid accepts exactly what uuid_in accepts, with its value");
    if (parsed) {
        const std::string canonical = whizbang::core::to_string(*parsed);
        FUZZ_CHECK(canonical.size() == 36 && whizbang::core::parse_uuid(canonical) == parsed,
                   "the canonical text parses back to the same value");
        FUZZ_CHECK(whizbang::core::parse_uuid("{" + canonical + "}") == parsed, "braces are accepted");
    }

    const std::size_t half = size / 2;
    const Uuid event = whizbang::core::event_uuid(text.substr(0, half), text.substr(half));
    FUZZ_CHECK((event[6] >> 4) == 5 && (event[8] >> 6) == 2, "event ids are version 5, variant 10");
    FUZZ_CHECK(event == whizbang::core::event_uuid(text.substr(0, half), text.substr(half)), "event ids are stable");
    return 0;
}

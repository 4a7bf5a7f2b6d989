// Fuzz target: canonical_number (src/core/canonical_json.h), the plain decimal form of one JSON
// number literal. Checks, for every accepted literal:
//   - the result is plain decimal: no exponent, no leading or fractional trailing zeros, no "-0";
//   - it is a fixed point, and canonical_json gives the same text for the literal in an array;
//   - it denotes the same value (both read by strtod, which rounds correctly, give one double);
// and that anything refused is an InputError (invalid_json, or out_of_range for the exponent).
#include <cstdlib>
#include <string>

#include "canonical_json.h"
#include "fuzz_check.h"

namespace {

using Kind = whizbang::core::InputError::Kind;

bool is_plain_decimal(const std::string& s) {
    std::size_t i = s[0] == '-' ? 1 : 0;
    if (i == s.size()) return false;
    if (s[i] == '0') {
        ++i;
        if (i == s.size()) return s == "0";  // "-0" is never produced
    } else {
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        if (i == s.size()) return true;
    }
    if (s[i] != '.' || i + 1 == s.size() || s.back() == '0') return false;
    for (++i; i < s.size(); ++i)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string literal(whizbang::fuzz::as_text(data, size));
    std::string plain;
    try {
        plain = whizbang::core::canonical_number(literal);
    } catch (const whizbang::core::InputError& e) {
        whizbang::fuzz::check_error_kind(e, {Kind::invalid_json, Kind::out_of_range});
        return 0;
    }
    FUZZ_CHECK(!plain.empty() && is_plain_decimal(plain), "the result is a plain decimal");
    FUZZ_CHECK(whizbang::core::canonical_number(plain) == plain, "the plain form is a fixed point");
    FUZZ_CHECK(whizbang::core::canonical_json("[" + literal + "]") == "[" + plain + "]",
               "canonical_json prints a number as canonical_number does");
    if (plain.size() < 400) {
        FUZZ_CHECK(std::strtod(literal.c_str(), nullptr) == std::strtod(plain.c_str(), nullptr),
                   "the plain form has the literal's value");
    }
    return 0;
}

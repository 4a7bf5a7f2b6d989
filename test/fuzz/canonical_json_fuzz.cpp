// Fuzz target: canonical JSON (src/core/canonical_json.h), the text every payload fingerprint
// is taken of. Client payloads reach it unchecked, so beyond "no crash, no leak" it checks:
//   - bad input is an InputError of a documented kind, never another exception;
//   - the canonical form is a fixed point: canonicalising it again gives the same text;
//   - removing ignore paths from the canonical text gives what removing them from the original
//     gives (sorting, duplicate keys and removal agree), and the result is canonical too;
//   - fingerprint() is SHA-256 of that text;
//   - nothing nested deeper than the documented 10,000 levels is accepted, and the
//     limit_exceeded error is only given for documents that do go deeper.
// Input: the JSON document, then optionally NUL-separated dotted ignore paths
// ("doc\0meta.traceId\0items.0"); JSON text cannot contain a raw NUL, so the split is free.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "canonical_json.h"
#include "fuzz_check.h"
#include "sha.h"

namespace {

using whizbang::core::InputError;
using Kind = whizbang::core::InputError::Kind;

constexpr std::size_t kDocumentedDepthLimit = 10000;  // docs/fingerprint.md

// Deepest bracket nesting outside strings. Exact for valid JSON and for the valid prefix of a
// document the parser gave up on.
std::size_t max_depth(std::string_view text) {
    std::size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == '}' || c == ']') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

// Whether some object of valid JSON `text` names a key twice (keys compared decoded, so that
// "a" and "\u0061" are one key). Canonicalising keeps the last value of such a key, as jsonb
// does, so whatever an earlier value nested is gone and the depth may drop.
bool has_duplicate_key(std::string_view text) {
    std::vector<std::vector<std::string>> keys;  // per open bracket: the keys of an object
    std::vector<bool> is_object;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '{' || c == '[') {
            is_object.push_back(c == '{');
            keys.emplace_back();
        } else if (c == '}' || c == ']') {
            if (!is_object.empty()) is_object.pop_back(), keys.pop_back();
        } else if (c == '"') {
            const std::size_t start = i;
            for (++i; i < text.size() && text[i] != '"'; ++i)
                if (text[i] == '\\') ++i;
            std::size_t next = i + 1;
            while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\n' || text[next] == '\r'))
                ++next;
            if (is_object.empty() || !is_object.back() || next >= text.size() || text[next] != ':') continue;
            std::string key = whizbang::core::canonical_json(text.substr(start, i + 1 - start));
            auto& seen = keys.back();
            if (std::find(seen.begin(), seen.end(), key) != seen.end()) return true;
            seen.push_back(std::move(key));
        }
    }
    return false;
}

// No whitespace outside strings and no raw control character anywhere.
bool looks_canonical(std::string_view text) {
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20) return false;
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ' ') {
            return false;
        }
    }
    return !in_string;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = whizbang::fuzz::as_text(data, size);
    const std::size_t nul = input.find('\0');
    const std::string_view doc = input.substr(0, nul);
    std::vector<std::string> paths;
    for (std::size_t start = nul; start != std::string_view::npos && start < input.size();) {
        const std::size_t next = input.find('\0', start + 1);
        paths.emplace_back(input.substr(start + 1, next == std::string_view::npos ? next : next - start - 1));
        start = next;
    }

    std::string canonical;
    try {
        canonical = whizbang::core::canonical_json(doc);
    } catch (const InputError& e) {
        whizbang::fuzz::check_error_kind(e, {Kind::invalid_json, Kind::out_of_range, Kind::limit_exceeded});
        if (e.kind() == Kind::limit_exceeded)
            FUZZ_CHECK(max_depth(doc) > kDocumentedDepthLimit, "the depth limit refuses only documents beyond it");
        return 0;
    }
    FUZZ_CHECK(max_depth(doc) <= kDocumentedDepthLimit, "nothing deeper than the limit is accepted");
    FUZZ_CHECK(looks_canonical(canonical), "canonical text has no whitespace or raw control characters");
    // {"a":{}, "a":2} is {"a":2}: a duplicate key keeps its last value (jsonb's rule).
    FUZZ_CHECK(max_depth(canonical) == max_depth(doc) || (max_depth(canonical) < max_depth(doc) && has_duplicate_key(doc)),
               "canonicalising keeps the nesting, but for values a duplicate key replaced");
    FUZZ_CHECK(whizbang::core::canonical_json(canonical) == canonical, "the canonical form is a fixed point");
    FUZZ_CHECK(whizbang::core::fingerprint(doc) == whizbang::core::sha256(canonical),
               "the fingerprint is SHA-256 of the canonical text");

    if (paths.empty()) return 0;
    std::string pruned;
    try {
        pruned = whizbang::core::canonical_json(doc, paths);
    } catch (const InputError& e) {
        // The document is valid: only an ignore path can be wrong, and it is wrong either way.
        whizbang::fuzz::check_error_kind(e, {Kind::invalid_parameter});
        bool threw = false;
        try {
            whizbang::core::canonical_json(canonical, paths);
        } catch (const InputError& again) {
            threw = again.kind() == Kind::invalid_parameter;
        }
        FUZZ_CHECK(threw, "a bad ignore path is refused whatever the document");
        return 0;
    }
    FUZZ_CHECK(whizbang::core::canonical_json(canonical, paths) == pruned,
               "ignore paths remove the same from the canonical text as from the original");
    FUZZ_CHECK(whizbang::core::canonical_json(pruned) == pruned, "the pruned form is canonical");
    FUZZ_CHECK(pruned.size() <= canonical.size(), "removing paths never adds anything");
    FUZZ_CHECK(whizbang::core::fingerprint(doc, paths) == whizbang::core::sha256(pruned),
               "the fingerprint with ignore paths is SHA-256 of the pruned text");
    return 0;
}

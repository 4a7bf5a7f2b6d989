// Fuzz target: split_dotted_path (src/core/canonical_json.h), the reader of the fingerprint's
// dotted ignore paths. A path is refused (InputError invalid_parameter) exactly when it is empty
// or has an empty segment; otherwise its segments are non-empty, hold no dot, and joined with
// dots give the path back.
#include <string>
#include <vector>

#include "canonical_json.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view path = whizbang::fuzz::as_text(data, size);
    const bool malformed = path.empty() || path.front() == '.' || path.back() == '.' ||
                           path.find("..") != std::string_view::npos;
    std::vector<std::string> segments;
    try {
        segments = whizbang::core::split_dotted_path(path);
    } catch (const whizbang::core::InputError& e) {
        whizbang::fuzz::check_error_kind(e, {whizbang::core::InputError::Kind::invalid_parameter});
        FUZZ_CHECK(malformed, "only an empty path or one with an empty segment is refused");
        return 0;
    }
    FUZZ_CHECK(!malformed, "an empty path or one with an empty segment is refused");
    std::string joined;
    for (const auto& s : segments) {
        FUZZ_CHECK(!s.empty() && s.find('.') == std::string::npos, "segments are non-empty and hold no dot");
        if (!joined.empty()) joined += '.';
        joined += s;
    }
    FUZZ_CHECK(joined == path, "the segments joined with dots give the path back");
    return 0;
}

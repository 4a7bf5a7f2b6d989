#include "excerpt.h"

namespace whizbang::core {

std::string quoted_excerpt(std::string_view text) {
    // Count characters as UTF-8 lead bytes: a continuation byte (10xxxxxx) never starts one.
    std::size_t chars = 0, cut = 0;
    for (; cut < text.size(); ++cut) {
        if ((static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) continue;
        if (chars == kMaxEchoChars) break;
        ++chars;
    }
    std::string out;
    out.reserve(cut + 32);
    out += '"';
    out.append(text.data(), cut);
    if (cut == text.size()) {
        out += '"';
    } else {
        out += "...\" (";
        out += std::to_string(text.size());
        out += " bytes)";
    }
    return out;
}

}  // namespace whizbang::core

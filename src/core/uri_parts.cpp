#include "uri_parts.h"

namespace whizbang::core {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

SplitUri split_query(std::string_view uri) {
    uri = uri.substr(0, uri.find('#'));
    const auto q = uri.find('?');
    if (q == std::string_view::npos) return {std::string(uri), ""};
    return {std::string(uri.substr(0, q)), std::string(uri.substr(q + 1))};
}

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        if (i + 2 >= text.size()) return std::nullopt;
        const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query) {
    std::vector<std::pair<std::string, std::string>> pairs;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (pair.empty()) continue;
        const auto eq = pair.find('=');
        auto name = percent_decode(pair.substr(0, eq));
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
        if (!name || !value) return std::nullopt;
        pairs.emplace_back(std::move(*name), std::move(*value));
    }
    return pairs;
}

std::string redact_password(std::string_view uri) {
    const auto scheme_end = uri.find("://");
    if (scheme_end == std::string_view::npos) return std::string(uri);
    const std::size_t authority = scheme_end + 3;
    // The authority ends at the first '/', '?' or '#'; userinfo is what precedes its last '@'.
    const auto authority_end = uri.find_first_of("/?#", authority);
    const std::string_view auth = uri.substr(authority, authority_end == std::string_view::npos ? std::string_view::npos : authority_end - authority);
    const auto at = auth.rfind('@');
    if (at == std::string_view::npos) return std::string(uri);
    const auto colon = auth.substr(0, at).find(':');
    if (colon == std::string_view::npos) return std::string(uri);
    std::string out(uri.substr(0, authority + colon + 1));
    out += "***";
    out += uri.substr(authority + at);
    return out;
}

std::string header_value_escape(std::string_view value) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(value.size());
    for (char ch : value) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c >= 0x7f || c == '%') {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 0x0f];
        } else {
            out += ch;
        }
    }
    return out;
}

}  // namespace whizbang::core

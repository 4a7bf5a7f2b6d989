// Strict JSON (RFC 8259) to canonical text. The document is parsed into a flat arena of nodes
// and both parsing and printing use explicit stacks: payloads come from clients, and a deeply
// nested one must produce an error, not overflow the backend's stack (recursive destruction of
// a pointer tree would have the same problem, hence indices instead of owning pointers).
#include "canonical_json.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "error.h"
#include "excerpt.h"

namespace whizbang::core {
namespace {

constexpr std::int64_t kMaxExponent = 100000;

[[noreturn]] void fail_json(std::size_t at, const std::string& what) {
    throw InputError(InputError::Kind::invalid_json, "invalid JSON at byte " + std::to_string(at) + ": " + what);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Validates one number literal and returns its plain decimal form. `base` is the literal's byte
// offset in the document, so that errors point into the document rather than into the literal.
std::string canonical_number_at(std::string_view lit, std::size_t base) {
    std::size_t i = 0;
    const std::size_t n = lit.size();
    auto at = [&](std::size_t k) { return k < n ? lit[k] : '\0'; };

    bool negative = false;
    if (at(i) == '-') {
        negative = true;
        ++i;
    }
    if (!is_digit(at(i))) fail_json(base + i, "expected digit in number");
    const std::size_t int_begin = i;
    if (lit[i] == '0') {
        ++i;
        if (is_digit(at(i))) fail_json(base + i, "leading zero in number");
    } else {
        while (is_digit(at(i))) ++i;
    }
    // All significant digits, integer and fraction, with the decimal point after `point` of them.
    std::string digits(lit.substr(int_begin, i - int_begin));
    std::int64_t point = static_cast<std::int64_t>(digits.size());

    if (at(i) == '.') {
        ++i;
        const std::size_t frac_begin = i;
        while (is_digit(at(i))) ++i;
        if (i == frac_begin) fail_json(base + i, "expected digit after decimal point");
        digits.append(lit.substr(frac_begin, i - frac_begin));
    }

    std::int64_t exponent = 0;
    std::size_t exp_at = 0;
    if (at(i) == 'e' || at(i) == 'E') {
        exp_at = i;
        ++i;
        bool exp_negative = false;
        if (at(i) == '+' || at(i) == '-') {
            exp_negative = at(i) == '-';
            ++i;
        }
        const std::size_t exp_begin = i;
        while (is_digit(at(i))) {
            // Saturate just above the limit: the digits may be arbitrarily many.
            if (exponent <= kMaxExponent) exponent = exponent * 10 + (lit[i] - '0');
            ++i;
        }
        if (i == exp_begin) fail_json(base + i, "expected digit in exponent");
        if (exp_negative) exponent = -exponent;
    }
    if (i != n) fail_json(base + i, "unexpected character in number");
    // The plain form of 1e1000000 would be a megabyte of zeros: refuse rather than allocate.
    if (exponent > kMaxExponent || exponent < -kMaxExponent) {
        throw InputError(InputError::Kind::out_of_range, "number exponent at byte " + std::to_string(base + exp_at) +
                                                              " is out of range (limit is 100000)");
    }

    const std::size_t first = digits.find_first_not_of('0');
    if (first == std::string::npos) return "0";  // every zero, signed or not, is "0"
    const std::size_t last = digits.find_last_not_of('0');
    const std::string_view sig = std::string_view(digits).substr(first, last + 1 - first);
    point += exponent - static_cast<std::int64_t>(first);
    const auto sig_len = static_cast<std::int64_t>(sig.size());

    std::string out;
    if (negative) out += '-';
    if (point <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-point), '0');
        out += sig;
    } else if (point >= sig_len) {
        out += sig;
        out.append(static_cast<std::size_t>(point - sig_len), '0');
    } else {
        out += sig.substr(0, static_cast<std::size_t>(point));
        out += '.';
        out += sig.substr(static_cast<std::size_t>(point));
    }
    return out;
}

enum class Type { literal, string, object, array };

struct Node {
    Type type;
    std::string text;  // literal: its canonical text; string: the decoded value
    std::vector<std::pair<std::string, std::size_t>> members;  // object: sorted, unique keys
    std::vector<std::size_t> elements;                         // array
};

using Arena = std::vector<Node>;


// Sorting once when the object closes makes key lookup (ignore paths) and printing trivial.
// The sort is stable so that, among duplicates, the one that came last is still last.
void sort_members(Node& object) {
    auto& m = object.members;
    std::stable_sort(m.begin(), m.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::pair<std::string, std::size_t>> unique;
    unique.reserve(m.size());
    for (std::size_t i = 0; i < m.size(); ++i) {
        if (i + 1 < m.size() && m[i + 1].first == m[i].first) continue;
        unique.push_back(std::move(m[i]));
    }
    m = std::move(unique);
}

class Parser {
public:
    Parser(std::string_view in, Arena& arena) : in_(in), arena_(arena) {}

    // Returns the index of the root node.
    std::size_t parse() {
        skip_ws();
        const std::size_t root = begin_value();
        while (!open_.empty()) step();
        skip_ws();
        if (pos_ != in_.size()) fail_json(pos_, "unexpected data after the JSON value");
        return root;
    }

private:
    struct Open {
        std::size_t node;
        bool empty;  // no member read yet, so no ',' is due
    };

    bool next_is(char c) const { return pos_ < in_.size() && in_[pos_] == c; }

    void skip_ws() {
        while (pos_ < in_.size() &&
               (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
            ++pos_;
        }
    }

    // Reads one member or element of the innermost open container, or closes it.
    void step() {
        Open& top = open_.back();
        const std::size_t node = top.node;
        const bool is_object = arena_[node].type == Type::object;
        const char close = is_object ? '}' : ']';

        skip_ws();
        if (next_is(close)) {
            ++pos_;
            if (is_object) sort_members(arena_[node]);
            open_.pop_back();
            return;
        }
        if (top.empty) {
            top.empty = false;
        } else {
            if (!next_is(',')) fail_json(pos_, is_object ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
            ++pos_;
            skip_ws();
        }

        if (is_object) {
            if (!next_is('"')) fail_json(pos_, "expected string as object key");
            std::string key = parse_string();
            skip_ws();
            if (!next_is(':')) fail_json(pos_, "expected ':' after object key");
            ++pos_;
            skip_ws();
            const std::size_t child = begin_value();  // may grow arena_ and open_
            arena_[node].members.emplace_back(std::move(key), child);
        } else {
            const std::size_t child = begin_value();
            arena_[node].elements.push_back(child);
        }
    }

    // Parses a scalar completely, or opens a container for step() to fill.
    std::size_t begin_value() {
        if (pos_ >= in_.size()) fail_json(pos_, "unexpected end of input, expected a value");
        const char c = in_[pos_];
        switch (c) {
            case '{':
            case '[': {
                if (open_.size() >= kMaxJsonDepth) {
                    throw InputError(InputError::Kind::limit_exceeded,
                                     "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
                                         std::to_string(pos_));
                }
                ++pos_;
                open_.push_back({arena_.size(), true});
                return add(Node{c == '{' ? Type::object : Type::array, {}, {}, {}});
            }
            case '"': {
                std::string value = parse_string();
                return add(Node{Type::string, std::move(value), {}, {}});
            }
            case 't':
                return parse_keyword("true");
            case 'f':
                return parse_keyword("false");
            case 'n':
                return parse_keyword("null");
            default:
                break;
        }
        if (c == '-' || is_digit(c)) {
            // Take every character a number could contain; canonical_number_at() judges them.
            const std::size_t start = pos_;
            while (pos_ < in_.size() && (is_digit(in_[pos_]) || in_[pos_] == '-' || in_[pos_] == '+' ||
                                         in_[pos_] == '.' || in_[pos_] == 'e' || in_[pos_] == 'E')) {
                ++pos_;
            }
            return add(Node{Type::literal, canonical_number_at(in_.substr(start, pos_ - start), start), {}, {}});
        }
        fail_json(pos_, "expected a value");
    }

    std::size_t add(Node node) {
        arena_.push_back(std::move(node));
        return arena_.size() - 1;
    }

    std::size_t parse_keyword(std::string_view word) {
        if (in_.substr(pos_, word.size()) != word) fail_json(pos_, "expected a value");
        pos_ += word.size();
        return add(Node{Type::literal, std::string(word), {}, {}});
    }

    std::optional<std::uint32_t> hex4(std::size_t at) const {
        if (at + 4 > in_.size()) return std::nullopt;
        std::uint32_t v = 0;
        for (std::size_t i = at; i < at + 4; ++i) {
            const char h = in_[i];
            int d;
            if (h >= '0' && h <= '9') d = h - '0';
            else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
            else return std::nullopt;
            v = v << 4 | static_cast<std::uint32_t>(d);
        }
        return v;
    }

    // Decodes the string starting at the opening quote at pos_. Bytes >= 0x80 are copied as
    // they are: validating UTF-8 is the server's job (its encoding), not the fingerprint's.
    std::string parse_string() {
        const std::size_t start = pos_++;
        std::string out;
        for (;;) {
            if (pos_ >= in_.size()) fail_json(start, "unterminated string");
            const auto c = static_cast<unsigned char>(in_[pos_]);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) fail_json(pos_, "unescaped control character in string");
            if (c != '\\') {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            const std::size_t esc = pos_;
            const char e = pos_ + 1 < in_.size() ? in_[pos_ + 1] : '\0';
            pos_ += 2;
            if (const char unescaped = json_simple_escape(e)) {
                out += unescaped;
            } else if (e == 'u') {
                append_utf8(out, parse_unicode_escape(esc));
            } else {
                fail_json(esc, "invalid escape sequence in string");
            }
        }
    }

    // pos_ is just past "\u"; a high surrogate must be followed by an escaped low surrogate.
    std::uint32_t parse_unicode_escape(std::size_t esc) {
        const auto hi = hex4(pos_);
        if (!hi) fail_json(esc, "invalid \\u escape, expected four hex digits");
        pos_ += 4;
        if (*hi >= 0xdc00 && *hi <= 0xdfff) fail_json(esc, "lone low surrogate in \\u escape");
        if (*hi < 0xd800 || *hi > 0xdbff) return *hi;
        const auto lo = in_.substr(pos_, 2) == "\\u" ? hex4(pos_ + 2) : std::nullopt;
        if (!lo || *lo < 0xdc00 || *lo > 0xdfff) fail_json(esc, "lone high surrogate in \\u escape");
        pos_ += 6;
        return 0x10000 + ((*hi - 0xd800) << 10) + (*lo - 0xdc00);
    }

    std::string_view in_;
    Arena& arena_;
    std::size_t pos_ = 0;
    std::vector<Open> open_;
};

// Array index segment: decimal digits only. Anything else (or an index too large to hold) simply
// matches no element, like any other path that does not exist.
std::optional<std::size_t> array_index(const std::string& segment) {
    if (segment.empty() || segment.size() > 18) return std::nullopt;
    std::size_t v = 0;
    for (char c : segment) {
        if (!is_digit(c)) return std::nullopt;
        v = v * 10 + static_cast<std::size_t>(c - '0');
    }
    return v;
}

void remove_path(Arena& arena, std::size_t root, const std::vector<std::string>& path) {
    std::size_t node = root;
    for (std::size_t s = 0; s < path.size(); ++s) {
        const bool last = s + 1 == path.size();
        Node& n = arena[node];
        if (n.type == Type::object) {
            auto it = std::lower_bound(n.members.begin(), n.members.end(), path[s],
                                       [](const auto& member, const std::string& key) { return member.first < key; });
            if (it == n.members.end() || it->first != path[s]) return;
            if (last) {
                n.members.erase(it);
                return;
            }
            node = it->second;
        } else if (n.type == Type::array) {
            const auto index = array_index(path[s]);
            if (!index || *index >= n.elements.size()) return;
            if (last) {
                n.elements.erase(n.elements.begin() + static_cast<std::ptrdiff_t>(*index));
                return;
            }
            node = n.elements[*index];
        } else {
            return;
        }
    }
}

// Byte for byte what PostgreSQL's escape_json() writes, so canonical text matches jsonb output.
void append_escaped(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (const char ch : s) {
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default: {
                const auto c = static_cast<unsigned char>(ch);
                if (c < 0x20) {
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 0x0f];
                } else {
                    out += ch;
                }
            }
        }
    }
    out += '"';
}

std::string print(const Arena& arena, std::size_t root) {
    struct Open {
        std::size_t node;
        std::size_t next;  // index of the next member or element to print
    };
    std::vector<Open> open;
    std::string out;

    auto begin = [&](std::size_t index) {
        const Node& n = arena[index];
        switch (n.type) {
            case Type::literal: out += n.text; break;
            case Type::string: append_escaped(out, n.text); break;
            case Type::object:
                out += '{';
                open.push_back({index, 0});
                break;
            case Type::array:
                out += '[';
                open.push_back({index, 0});
                break;
        }
    };

    begin(root);
    while (!open.empty()) {
        Open& top = open.back();
        const Node& n = arena[top.node];
        const bool is_object = n.type == Type::object;
        const std::size_t count = is_object ? n.members.size() : n.elements.size();
        if (top.next == count) {
            out += is_object ? '}' : ']';
            open.pop_back();
            continue;
        }
        const std::size_t i = top.next++;  // before begin(), which may reallocate `open`
        if (i > 0) out += ',';
        if (is_object) {
            append_escaped(out, n.members[i].first);
            out += ':';
            begin(n.members[i].second);
        } else {
            begin(n.elements[i]);
        }
    }
    return out;
}

}  // namespace

std::vector<std::string> split_dotted_path(std::string_view path) {
    if (path.empty()) throw InputError(InputError::Kind::invalid_parameter, "ignore path is empty");
    std::vector<std::string> segments;
    std::size_t start = 0;
    for (;;) {
        const std::size_t dot = path.find('.', start);
        const std::size_t end = dot == std::string_view::npos ? path.size() : dot;
        if (end == start) {
            throw InputError(InputError::Kind::invalid_parameter, "ignore path " + quoted_excerpt(path) +
                                                                      " has an empty segment at byte " +
                                                                      std::to_string(start));
        }
        segments.emplace_back(path.substr(start, end - start));
        if (dot == std::string_view::npos) return segments;
        start = dot + 1;
    }
}

std::string canonical_json(std::string_view json, const std::vector<std::string>& ignore_paths) {
    std::vector<std::vector<std::string>> paths;
    paths.reserve(ignore_paths.size());
    for (const auto& p : ignore_paths) paths.push_back(split_dotted_path(p));

    Arena arena;
    const std::size_t root = Parser(json, arena).parse();
    for (const auto& p : paths) remove_path(arena, root, p);
    return print(arena, root);
}

std::string canonical_number(std::string_view literal) { return canonical_number_at(literal, 0); }

Sha256Digest fingerprint(std::string_view json, const std::vector<std::string>& ignore_paths) {
    return sha256(canonical_json(json, ignore_paths));
}

void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

char json_simple_escape(char e) {
    switch (e) {
        case '"': return '"';
        case '\\': return '\\';
        case '/': return '/';
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        default: return 0;
    }
}

}  // namespace whizbang::core

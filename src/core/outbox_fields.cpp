#include "outbox_fields.h"

#include <cstdint>
#include <optional>

#include "canonical_json.h"  // kMaxJsonDepth
#include "error.h"
#include "uuid.h"

namespace whizbang::core {
namespace {

using Kind = InputError::Kind;

// A recursive-descent JSON reader that keeps only the decoded string values of the top-level
// members the relay asks for.
class Reader {
public:
    explicit Reader(std::string_view text) : text_(text) {}

    OutboxFields read() {
        skip_ws();
        if (peek() != '{') fail("the message is not a JSON object");
        object(0, true);
        skip_ws();
        if (pos_ != text_.size()) fail("text after the JSON object");
        OutboxFields f;
        f.message_id = uuid_field("MessageId", id_);
        f.destination = string_field("Destination", destination_);
        f.message_type = string_field("MessageType", type_);
        if (stream_.has_value() && stream_->kind == Value::string)
            f.stream_id = uuid_field("StreamId", stream_);
        else if (stream_.has_value() && stream_->kind != Value::null)
            throw InputError(Kind::invalid_parameter, "StreamId must be a UUID string or null");
        return f;
    }

private:
    struct Value {
        enum Kind { string, null, other } kind = other;
        std::string text;
    };

    static std::string string_field(const char* name, const std::optional<Value>& v) {
        if (!v.has_value()) throw InputError(Kind::invalid_parameter, std::string("the message has no ") + name);
        if (v->kind != Value::string) throw InputError(Kind::invalid_parameter, std::string(name) + " must be a string");
        return v->text;
    }

    static std::string uuid_field(const char* name, const std::optional<Value>& v) {
        const std::string s = string_field(name, v);
        const auto u = parse_uuid(s);
        if (!u.has_value()) throw InputError(Kind::invalid_parameter, std::string(name) + " is not a UUID: " + s.substr(0, 64));
        return to_string(*u);
    }

    [[noreturn]] void fail(const std::string& what) {
        throw InputError(Kind::invalid_json, what + " at byte " + std::to_string(pos_));
    }

    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_ws() {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            ++pos_;
    }

    void expect(char c) {
        if (peek() != c || pos_ >= text_.size()) fail(std::string("expected '") + c + "'");
        ++pos_;
    }

    // One value; when `keep` is given its string value (or null) is stored there.
    void value(std::size_t depth, Value* keep) {
        skip_ws();
        const char c = peek();
        if (c == '{') {
            object(depth + 1, false);
        } else if (c == '[') {
            array(depth + 1);
        } else if (c == '"') {
            std::string s = string();
            if (keep != nullptr) {
                keep->kind = Value::string;
                keep->text = std::move(s);
            }
            return;
        } else if (literal("true") || literal("false")) {
        } else if (literal("null")) {
            if (keep != nullptr) keep->kind = Value::null;
            return;
        } else {
            number();
        }
        if (keep != nullptr) keep->kind = Value::other;
    }

    bool literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    void depth_check(std::size_t depth) {
        if (depth > kMaxJsonDepth)
            throw InputError(Kind::limit_exceeded, "the message nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }

    void object(std::size_t depth, bool top) {
        depth_check(depth);
        expect('{');
        skip_ws();
        if (peek() == '}') {
            ++pos_;
            return;
        }
        for (;;) {
            skip_ws();
            if (peek() != '"') fail("expected a member name");
            const std::string name = string();
            skip_ws();
            expect(':');
            std::optional<Value>* slot = nullptr;
            if (top) {
                if (name == "MessageId") slot = &id_;
                else if (name == "Destination") slot = &destination_;
                else if (name == "MessageType") slot = &type_;
                else if (name == "StreamId") slot = &stream_;
            }
            if (slot != nullptr) {
                Value v;
                value(depth, &v);
                *slot = std::move(v);  // the last of repeated members wins, as in jsonb
            } else {
                value(depth, nullptr);
            }
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            expect('}');
            return;
        }
    }

    void array(std::size_t depth) {
        depth_check(depth);
        expect('[');
        skip_ws();
        if (peek() == ']') {
            ++pos_;
            return;
        }
        for (;;) {
            value(depth, nullptr);
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            expect(']');
            return;
        }
    }

    void number() {
        const std::size_t start = pos_;
        auto digits = [&] {
            const std::size_t from = pos_;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
            return pos_ - from;
        };
        if (peek() == '-') ++pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (digits() == 0) {
            pos_ = start;
            fail("expected a JSON value");
        }
        if (peek() == '.') {
            ++pos_;
            if (digits() == 0) fail("expected digits after '.'");
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (digits() == 0) fail("expected digits in the exponent");
        }
    }

    unsigned hex4() {
        if (text_.size() - pos_ < 4) fail("a \\u escape is cut short");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = text_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
            else fail("a \\u escape has a non-hex digit");
        }
        return v;
    }

    // One UTF-8 sequence of the raw text, checked (no overlongs, surrogates or beyond U+10FFFF).
    void utf8(std::string& out) {
        const auto b0 = static_cast<unsigned char>(text_[pos_]);
        int n;
        std::uint32_t cp;
        if (b0 < 0x80) {
            n = 0, cp = b0;
        } else if ((b0 & 0xe0) == 0xc0) {
            n = 1, cp = b0 & 0x1fu;
        } else if ((b0 & 0xf0) == 0xe0) {
            n = 2, cp = b0 & 0x0fu;
        } else if ((b0 & 0xf8) == 0xf0) {
            n = 3, cp = b0 & 0x07u;
        } else {
            fail("invalid UTF-8");
        }
        if (text_.size() - pos_ < static_cast<std::size_t>(n) + 1) fail("invalid UTF-8 (cut short)");
        for (int i = 1; i <= n; ++i) {
            const auto b = static_cast<unsigned char>(text_[pos_ + static_cast<std::size_t>(i)]);
            if ((b & 0xc0) != 0x80) fail("invalid UTF-8");
            cp = (cp << 6) | (b & 0x3fu);
        }
        static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("invalid UTF-8");
        out.append(text_.substr(pos_, static_cast<std::size_t>(n) + 1));
        pos_ += static_cast<std::size_t>(n) + 1;
    }

    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= text_.size()) fail("a string is not terminated");
            const char c = text_[pos_];
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
            if (c != '\\') {
                utf8(out);
                continue;
            }
            ++pos_;
            if (pos_ >= text_.size()) fail("a string is not terminated");
            const char e = text_[pos_++];
            if (const char unescaped = json_simple_escape(e)) {
                out += unescaped;
                continue;
            }
            switch (e) {
                case 'u': {
                    std::uint32_t cp = hex4();
                    if (cp >= 0xd800 && cp <= 0xdbff) {
                        if (!literal("\\u")) fail("a lone high surrogate");
                        const unsigned low = hex4();
                        if (low < 0xdc00 || low > 0xdfff) fail("a high surrogate without its low half");
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                        fail("a lone low surrogate");
                    }
                    // \u0000 is valid JSON; jsonb refuses it, and no UUID or name holds it.
                    if (cp == 0) fail("\\u0000 in a string");
                    append_utf8(out, cp);
                    break;
                }
                default:
                    --pos_;
                    fail("an invalid escape");
            }
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    std::optional<Value> id_, destination_, type_, stream_;
};

}  // namespace

OutboxFields read_outbox_fields(std::string_view json) { return Reader(json).read(); }

std::string single_line(std::string_view json) {
    std::string out(json);
    for (char& c : out)
        if (c == '\n' || c == '\r') c = ' ';
    return out;
}

}  // namespace whizbang::core

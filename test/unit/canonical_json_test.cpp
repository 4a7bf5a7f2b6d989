#include "canonical_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error.h"
#include "test_helpers.h"

namespace whizbang::core {
namespace {

using Kind = InputError::Kind;

// Runs `fn` and returns the kind of InputError it threw; fails the test if it threw nothing.
template <typename Fn>
Kind error_kind(Fn fn) {
    try {
        fn();
    } catch (const InputError& e) {
        return e.kind();
    }
    ADD_FAILURE() << "expected an InputError";
    return Kind::invalid_parameter;
}

template <typename Fn>
std::string error_message(Fn fn) {
    try {
        fn();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an InputError";
    return {};
}

std::string canon(const std::string& json, const std::vector<std::string>& ignore = {}) {
    return canonical_json(json, ignore);
}

TEST(CanonicalJson, SortsKeysBytewise) {
    EXPECT_EQ(canon(R"({"b":1,"a":2,"B":3,"aa":4})"), R"({"B":3,"a":2,"aa":4,"b":1})");
    // UTF-8 byte order equals code point order: U+00E9 (c3 a9) before U+4E2D (e4 b8 ad).
    EXPECT_EQ(canon("{\"\u4e2d\":1,\"\u00e9\":2,\"z\":3}"), "{\"z\":3,\"\u00e9\":2,\"\u4e2d\":1}");
}

TEST(CanonicalJson, NestedObjectsAndArrays) {
    EXPECT_EQ(canon(R"({"z":{"y":[{"b":1,"a":[]}],"x":{}},"a":[[1,[2]],{}]})"),
              R"({"a":[[1,[2]],{}],"z":{"x":{},"y":[{"a":[],"b":1}]}})");
}

TEST(CanonicalJson, RemovesWhitespace) {
    EXPECT_EQ(canon(" \t\r\n{ \"a\" :\n[ 1 , 2 ] ,\t\"b\" : \"x y\" }\n "), R"({"a":[1,2],"b":"x y"})");
}

TEST(CanonicalJson, Scalars) {
    EXPECT_EQ(canon("true"), "true");
    EXPECT_EQ(canon(" false "), "false");
    EXPECT_EQ(canon("null"), "null");
    EXPECT_EQ(canon("\"s\""), "\"s\"");
    EXPECT_EQ(canon("[true,false,null]"), "[true,false,null]");
}

TEST(CanonicalJson, NumbersInDocuments) {
    EXPECT_EQ(canon(R"({"a":1.0,"b":1.50,"c":-0,"d":1e3,"e":-0.0})"), R"({"a":1,"b":1.5,"c":0,"d":1000,"e":0})");
    EXPECT_EQ(canon("1.0"), canon("1"));
}

TEST(CanonicalNumber, PlainDecimal) {
    EXPECT_EQ(canonical_number("0"), "0");
    EXPECT_EQ(canonical_number("7"), "7");
    EXPECT_EQ(canonical_number("-7"), "-7");
    EXPECT_EQ(canonical_number("1.50"), "1.5");
    EXPECT_EQ(canonical_number("1.0"), "1");
    EXPECT_EQ(canonical_number("100"), "100");
    EXPECT_EQ(canonical_number("0.001"), "0.001");
    EXPECT_EQ(canonical_number("-0"), "0");
    EXPECT_EQ(canonical_number("-0.000"), "0");
    EXPECT_EQ(canonical_number("0e5"), "0");
    EXPECT_EQ(canonical_number("0.10e1"), "1");
    EXPECT_EQ(canonical_number("1e3"), "1000");
    EXPECT_EQ(canonical_number("1.5e-3"), "0.0015");
    EXPECT_EQ(canonical_number("-12.3400E+2"), "-1234");
    EXPECT_EQ(canonical_number("1E-0"), "1");
    EXPECT_EQ(canonical_number("123.456e1"), "1234.56");
    EXPECT_EQ(canonical_number("123.456e-5"), "0.00123456");
    EXPECT_EQ(canonical_number("1e00000000000000000002"), "100");
    EXPECT_EQ(canonical_number("12345678901234567890123456789"), "12345678901234567890123456789");
    EXPECT_EQ(canonical_number("1e100000").size(), 100001u);
}

TEST(CanonicalNumber, RejectsMalformedLiterals) {
    for (const char* bad : {"", "-", "01", "-01", "1.", ".5", "+1", "1e", "1e+", "1.e3", "--1", "1x", "0x10", "1.5.2"}) {
        EXPECT_EQ(error_kind([&] { canonical_number(bad); }), Kind::invalid_json) << bad;
    }
}

TEST(CanonicalNumber, ExponentOutOfRange) {
    EXPECT_EQ(error_kind([] { canonical_number("1e100001"); }), Kind::out_of_range);
    EXPECT_EQ(error_kind([] { canonical_number("1e-100001"); }), Kind::out_of_range);
    EXPECT_EQ(error_kind([] { canonical_number("1e99999999999999999999999"); }), Kind::out_of_range);
    EXPECT_EQ(error_kind([] { canon("[1e200000]"); }), Kind::out_of_range);
}

TEST(CanonicalJson, StringEscapes) {
    EXPECT_EQ(canon(R"("caf\u00e9")"), "\"caf\xc3\xa9\"");
    EXPECT_EQ(canon(R"("\u001f")"), R"("\u001f")");
    EXPECT_EQ(canon(R"("\u001F")"), R"("\u001f")");
    EXPECT_EQ(canon(R"("a\/b")"), R"("a/b")");
    EXPECT_EQ(canon(R"("\ud83d\ude00")"), "\"\xf0\x9f\x98\x80\"");  // U+1F600
    EXPECT_EQ(canon(R"("\"\\\b\f\n\r\t")"), R"("\"\\\b\f\n\r\t")");
    EXPECT_EQ(canon(R"("\u0022\u005c\u0008\u000a")"), R"("\"\\\b\n")");
    EXPECT_EQ(canon(R"("\u0000\u0001\u007f")"), "\"\\u0000\\u0001\x7f\"");
    EXPECT_EQ(canon(R"("\u0041\u00e9\u4e2d")"), "\"A\xc3\xa9\xe4\xb8\xad\"");
    EXPECT_EQ(canon("\"\xc3\xa9 verbatim\""), "\"\xc3\xa9 verbatim\"");
    // Invalid UTF-8 is not the canonicaliser's business: passed through.
    EXPECT_EQ(canon("\"\xff\xfe\""), "\"\xff\xfe\"");
    // Keys are escaped like values and sorted by their decoded bytes.
    EXPECT_EQ(canon(R"({"\u0062":1,"a\n":2})"), R"({"a\n":2,"b":1})");
}

TEST(CanonicalJson, DuplicateKeysLastWins) {
    EXPECT_EQ(canon(R"({"a":1,"b":2,"a":3})"), R"({"a":3,"b":2})");
    EXPECT_EQ(canon(R"({"a":{"x":1},"a":[2],"a":"last"})"), R"({"a":"last"})");
    EXPECT_EQ(canon(R"({"\u0061":1,"a":2})"), R"({"a":2})");
}

TEST(CanonicalJson, IgnorePaths) {
    const std::string doc = R"({"meta":{"traceId":"t-1","user":"u"},"items":[{"id":1,"note":"n"},{"id":2}]})";
    EXPECT_EQ(canon(doc, {"meta.traceId"}), R"({"items":[{"id":1,"note":"n"},{"id":2}],"meta":{"user":"u"}})");
    EXPECT_EQ(canon(doc, {"items.0.note"}), R"({"items":[{"id":1},{"id":2}],"meta":{"traceId":"t-1","user":"u"}})");
    EXPECT_EQ(canon(doc, {"meta.traceId", "items.0.note"}), R"({"items":[{"id":1},{"id":2}],"meta":{"user":"u"}})");
    EXPECT_EQ(canon(doc, {"meta"}), R"({"items":[{"id":1,"note":"n"},{"id":2}]})");
    // The payload minus its trace id fingerprints like a payload that never had one.
    EXPECT_EQ(fingerprint(doc, {"meta.traceId"}),
              fingerprint(R"({"items":[{"id":1,"note":"n"},{"id":2}],"meta":{"user":"u"}})"));
}

TEST(CanonicalJson, IgnorePathRemovesArrayElementAndShifts) {
    EXPECT_EQ(canon(R"({"a":[10,20,30]})", {"a.0"}), R"({"a":[20,30]})");
    EXPECT_EQ(canon(R"({"a":[10,20,30]})", {"a.1"}), R"({"a":[10,30]})");
    // Paths apply in order: after removing element 0, the old element 1 is the new element 0.
    EXPECT_EQ(canon(R"({"a":[10,20,30]})", {"a.0", "a.0"}), R"({"a":[30]})");
    EXPECT_EQ(canon("[1,2,3]", {"2"}), "[1,2]");
}

TEST(CanonicalJson, IgnorePathThatDoesNotExist) {
    const std::string doc = R"({"a":{"b":1},"c":[1,2],"d":"s"})";
    const std::string expected = canon(doc);
    for (const char* path : {"x", "a.x", "a.b.c", "c.2", "c.-1", "c.+1", "c.x", "c.99999999999999999999999", "d.0",
                             "d.x", "a.b.c.d.e"}) {
        EXPECT_EQ(canon(doc, {path}), expected) << path;
    }
    EXPECT_EQ(canon("5", {"a"}), "5");
}

TEST(CanonicalJson, NumericSegmentOnObjectIsAKey) {
    EXPECT_EQ(canon(R"({"items":{"0":"zero","1":"one"}})", {"items.0"}), R"({"items":{"1":"one"}})");
}

TEST(CanonicalJson, InvalidIgnorePaths) {
    EXPECT_EQ(error_kind([] { split_dotted_path(""); }), Kind::invalid_parameter);
    for (const char* bad : {"a..b", ".a", "a.", "."}) {
        EXPECT_EQ(error_kind([&] { split_dotted_path(bad); }), Kind::invalid_parameter) << bad;
        EXPECT_EQ(error_kind([&] { canon("{}", {bad}); }), Kind::invalid_parameter) << bad;
    }
    EXPECT_EQ(split_dotted_path("meta.traceId"), (std::vector<std::string>{"meta", "traceId"}));
    EXPECT_EQ(split_dotted_path("items.0.note"), (std::vector<std::string>{"items", "0", "note"}));
    EXPECT_EQ(split_dotted_path("a"), (std::vector<std::string>{"a"}));
}

TEST(CanonicalJson, MalformedInputs) {
    const std::vector<std::string> bad = {
        "",          " ",        "{",          "}",          "[",         "[1,]",       "[,1]",      "[1 2]",
        "{\"a\" 1}", "{\"a\":}", "{\"a\":1,}", "{a:1}",      "{1:1}",     "01",         "1.",        ".5",
        "+1",        "-",        "\"\\x\"",    "\"abc",      "\"\\",      "{} x",       "1 2",       "[1]]",
        "tru",       "True",     "nul",        "NaN",        "Infinity",  "'a'",        "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"", "\"\\u12\"", "\"\\u12g4\"", "\"a\nb\"", "\"\t\"",
        "\"\x1f\"",  std::string("\"\0\"", 3), "[1,2", "{\"a\":1", "\xef\xbb\xbf{}",
    };
    for (const auto& doc : bad) {
        EXPECT_EQ(error_kind([&] { canon(doc); }), Kind::invalid_json) << "input: " << doc;
    }
}

TEST(CanonicalJson, ErrorMessagesSayWhatAndWhere) {
    EXPECT_EQ(error_message([] { canon(R"({"a" 1})"); }), "invalid JSON at byte 5: expected ':' after object key");
    EXPECT_EQ(error_message([] { canon("[1,]"); }), "invalid JSON at byte 3: expected a value");
    EXPECT_EQ(error_message([] { canon("{} x"); }), "invalid JSON at byte 3: unexpected data after the JSON value");
    EXPECT_EQ(error_message([] { canon("[01]"); }), "invalid JSON at byte 2: leading zero in number");
    EXPECT_EQ(error_message([] { canon(R"(["\ud800"])"); }), "invalid JSON at byte 2: lone high surrogate in \\u escape");
}

TEST(CanonicalJson, NestingDepthLimit) {
    const std::size_t limit = 10000;
    const std::string ok = std::string(limit, '[') + std::string(limit, ']');
    EXPECT_EQ(canon(ok), ok);
    const std::string too_deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
    // Valid but too deep: a limit of whizbang's (54000), not malformed input.
    EXPECT_EQ(error_kind([&] { canon(too_deep); }), Kind::limit_exceeded);
    EXPECT_NE(error_message([&] { canon(too_deep); }).find("nesting deeper than 10000"), std::string::npos);
    // Far deeper than any stack could recurse: must fail cleanly, not crash.
    EXPECT_EQ(error_kind([] { canon(std::string(1000000, '[')); }), Kind::limit_exceeded);
    std::string objects;
    for (std::size_t i = 0; i < limit + 1; ++i) objects += "{\"a\":";
    EXPECT_EQ(error_kind([&] { canon(objects); }), Kind::limit_exceeded);
}

// Pinned vectors: the canonical text and its SHA-256 (computed with `printf '%s' TEXT | sha256sum`)
// are part of the stored data format; a change here breaks every stored fingerprint.
TEST(CanonicalJson, PinnedFingerprints) {
    struct Case {
        const char* input;
        const char* canonical;
        const char* sha256;
    };
    const Case cases[] = {
        {R"( { "c" : { "d" : "x" }, "b" : [ true , false , null ], "a" : 1.0 } )",
         R"({"a":1,"b":[true,false,null],"c":{"d":"x"}})",
         "159748abab6f96d57ad8b67888c13994d77119f78e5a57ee9ae91a18563c2e51"},
        {"{ }", "{}", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        {R"({"tab":"a\tb","name":"caf\u00e9"})", "{\"name\":\"caf\xc3\xa9\",\"tab\":\"a\\tb\"}",
         "fdf3d2fe8210e9290b9105f46e5b21db2264dba472e12a794b6267ea5d440c6a"},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(canon(c.input), c.canonical);
        EXPECT_EQ(test::hex(fingerprint(c.input)), c.sha256) << c.input;
    }
}

}  // namespace
}  // namespace whizbang::core

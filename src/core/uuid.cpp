#include "uuid.h"

#include <string>

#include "error.h"
#include "sha.h"

namespace whizbang::core {

const Uuid kUrlNamespace = {0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1,
                            0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};

Uuid uuid_v5(const Uuid& ns, std::string_view name) {
    std::string input(reinterpret_cast<const char*>(ns.data()), ns.size());
    input.append(name);
    Sha1Digest digest = sha1(input);

    Uuid u{};
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = digest[i];
    u[6] = static_cast<std::uint8_t>((u[6] & 0x0f) | 0x50);
    u[8] = static_cast<std::uint8_t>((u[8] & 0x3f) | 0x80);
    return u;
}

Uuid event_uuid(std::string_view source, std::string_view id) {
    std::string name = std::to_string(source.size());
    name += ':';
    name.append(source);
    name.append(id);
    return uuid_v5(kUrlNamespace, name);
}

std::string to_string(const Uuid& u) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(36);
    for (std::size_t i = 0; i < u.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        out += kHex[u[i] >> 4];
        out += kHex[u[i] & 0x0f];
    }
    return out;
}

namespace {

constexpr std::int64_t kMaxUnixMs = (std::int64_t{1} << 48) - 1;
constexpr std::uint64_t kRandALimit = std::uint64_t{1} << 12;
constexpr std::uint64_t kRandBLimit = std::uint64_t{1} << 62;

void set_timestamp(Uuid& u, std::int64_t unix_ms) {
    if (unix_ms > kMaxUnixMs) {
        throw InputError(InputError::Kind::out_of_range,
                         "timestamp " + std::to_string(unix_ms) + " ms does not fit the 48 bits of a UUIDv7");
    }
    for (int i = 0; i < 6; ++i) u[5 - i] = static_cast<std::uint8_t>(unix_ms >> (8 * i));
}

// The 74 random bits split into rand_a (12) and rand_b (62) around the version and variant bits,
// so the counter is kept as two integers and written back with those bits forced.
struct Counter {
    std::uint64_t a;
    std::uint64_t b;
};

Counter read_counter(const Uuid& u) {
    Counter c{};
    c.a = (std::uint64_t{u[6]} & 0x0f) << 8 | u[7];
    c.b = std::uint64_t{u[8]} & 0x3f;
    for (int i = 9; i < 16; ++i) c.b = c.b << 8 | u[i];
    return c;
}

void write_counter(Uuid& u, const Counter& c) {
    u[6] = static_cast<std::uint8_t>(0x70 | (c.a >> 8));
    u[7] = static_cast<std::uint8_t>(c.a);
    u[8] = static_cast<std::uint8_t>(0x80 | (c.b >> 56));
    for (int i = 9; i < 16; ++i) u[i] = static_cast<std::uint8_t>(c.b >> (8 * (15 - i)));
}

void write_random(Uuid& u, const std::array<std::uint8_t, 10>& random) {
    u[6] = static_cast<std::uint8_t>(0x70 | (random[0] & 0x0f));
    u[7] = random[1];
    u[8] = static_cast<std::uint8_t>(0x80 | (random[2] & 0x3f));
    for (int i = 9; i < 16; ++i) u[i] = random[i - 6];
}

}  // namespace

Uuid UuidV7Generator::next(std::int64_t unix_ms, const std::array<std::uint8_t, 10>& random) {
    // Before 1970 cannot be represented; clamping keeps a badly set clock from failing inserts.
    if (unix_ms < 0) unix_ms = 0;

    Uuid u{};
    // A small step back is clock jitter (NTP slew, another backend's clock): stay on the last
    // timestamp so ordering survives. A large one is a deliberate reset and is honoured.
    bool continue_sequence = last_ms_ >= 0 && unix_ms <= last_ms_ && last_ms_ - unix_ms < kMaxBackwardMs;
    if (continue_sequence) {
        Counter c = read_counter(last_);
        if (++c.b == kRandBLimit) {
            c.b = 0;
            ++c.a;
        }
        if (c.a == kRandALimit) {
            // The counter is exhausted: borrowing the next millisecond is the only way to stay
            // increasing, and fresh bits there are as good as any.
            set_timestamp(u, last_ms_ + 1);
            write_random(u, random);
            last_ms_ += 1;
        } else {
            set_timestamp(u, last_ms_);
            write_counter(u, c);
        }
    } else {
        set_timestamp(u, unix_ms);
        write_random(u, random);
        last_ms_ = unix_ms;
    }
    last_ = u;
    return u;
}

std::optional<Uuid> parse_uuid(std::string_view text) {
    if (text.size() >= 2 && text.front() == '{' && text.back() == '}') text = text.substr(1, text.size() - 2);
    Uuid u{};
    int digits = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        // Like uuid_in: a hyphen may follow any complete group of four digits, never lead or trail.
        if (c == '-' && digits > 0 && digits % 4 == 0 && digits < 32 && i + 1 < text.size() && text[i + 1] != '-') continue;
        int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (v < 0 || digits == 32) return std::nullopt;
        u[digits / 2] = static_cast<std::uint8_t>(digits % 2 == 0 ? v << 4 : u[digits / 2] | v);
        ++digits;
    }
    if (digits != 32) return std::nullopt;
    return u;
}

}  // namespace whizbang::core

// Shared by the fuzz targets (test/fuzz/*_fuzz.cpp): property checks that stop the run with
// the failing input saved (libFuzzer writes it out when the process aborts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "error.h"

// The one entry point every target defines; the engine (libFuzzer, or random_driver.cpp when
// clang's libFuzzer is not available) calls it once per input.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

#define FUZZ_CHECK(cond, what)                                                                   \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            std::fprintf(stderr, "fuzz property violated at %s:%d: %s\n  (%s)\n", __FILE__,      \
                         __LINE__, what, #cond);                                                 \
            std::abort();                                                                        \
        }                                                                                        \
    } while (0)

namespace whizbang::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// The core reports bad input with InputError only; `allowed` says which kinds this entry point
// documents. Anything else escaping (std::out_of_range, bad_alloc, ...) is a bug: not caught here.
inline void check_error_kind(const whizbang::core::InputError& e, std::initializer_list<whizbang::core::InputError::Kind> allowed) {
    for (auto k : allowed) {
        if (e.kind() == k) {
            FUZZ_CHECK(e.what()[0] != '\0', "an InputError has a message");
            return;
        }
    }
    std::fprintf(stderr, "unexpected InputError kind %d: %s\n", static_cast<int>(e.kind()), e.what());
    std::abort();
}

}  // namespace whizbang::fuzz

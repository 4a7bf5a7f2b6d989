#include "relay/log.h"

#include <sys/time.h>
#include <time.h>

#include <cstdio>

namespace whizbang::relay {

void log_line(const char* level, const std::string& message) {
    timeval tv{};
    gettimeofday(&tv, nullptr);
    tm utc{};
    gmtime_r(&tv.tv_sec, &utc);
    char stamp[40];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &utc);
    // One fprintf per line: lines of concurrent writers to the same stderr do not interleave.
    std::fprintf(stderr, "%s.%03d UTC whizbang-relay %s: %s\n", stamp, static_cast<int>(tv.tv_usec / 1000), level,
                 message.c_str());
    std::fflush(stderr);
}

}  // namespace whizbang::relay

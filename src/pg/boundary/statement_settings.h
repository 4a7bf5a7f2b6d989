// Settings changed for one piece of work only, as fmgr does for a function's SET clause.
#pragma once

#include <initializer_list>
#include <type_traits>
#include <utility>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// Runs f() with `settings` (name, value) in a GUC nest level of their own, restored when f
// returns; returns what f returns. A SET LOCAL would outlive the subtransaction the work may run
// in, into the caller's transaction. On an error the (sub)transaction's abort restores them.
template <typename F>
auto with_settings(std::initializer_list<std::pair<const char*, const char*>> settings, F&& f) {
    const int level = pg_call([&] {
        const int nest_level = NewGUCNestLevel();
        for (const auto& s : settings)
            (void)set_config_option(s.first, s.second, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
        return nest_level;
    });
    if constexpr (std::is_void_v<decltype(f())>) {
        f();
        pg_call([level] { AtEOXact_GUC(true, level); });
    } else {
        auto result = f();
        pg_call([level] { AtEOXact_GUC(true, level); });
        return result;
    }
}

}  // namespace whizbang::pg

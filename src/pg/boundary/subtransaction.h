// A piece of work that may fail in an expected way without failing the caller's transaction.
#pragma once

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// Runs f in a subtransaction. Returns true when f finished (the subtransaction committed into
// the caller's); false when f raised a PostgreSQL error whose SQLSTATE `tolerated` accepts (f's
// work undone, its locks released). Any other error or exception rolls the subtransaction back
// and propagates. Memory context and resource owner are the caller's again either way.
template <typename F, typename Tolerated>
bool in_subtransaction(F&& f, Tolerated&& tolerated) {
    MemoryContext context = CurrentMemoryContext;
    ResourceOwner resources = CurrentResourceOwner;
    auto leave = [&](bool commit) {
        pg_call([&] {
            if (commit)
                ReleaseCurrentSubTransaction();
            else
                RollbackAndReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(context);
            CurrentResourceOwner = resources;
        });
    };
    pg_call([&] {
        BeginInternalSubTransaction(nullptr);
        MemoryContextSwitchTo(context);
    });
    try {
        f();
        leave(true);
        return true;
    } catch (const PgError& e) {
        const int code = e.data() ? e.data()->sqlerrcode : 0;
        leave(false);
        if (!tolerated(code)) throw;
        return false;
    } catch (...) {
        leave(false);
        throw;
    }
}

}  // namespace whizbang::pg

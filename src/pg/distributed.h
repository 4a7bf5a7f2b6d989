// Whether whizbang's tables were handed to Citus (whizbang.distribute(), DESIGN §3.9). On a
// distributed install the local heaps of those tables are empty shells: a C++ path that reads or
// writes them directly would lose data or answer from nothing, so each entry point that has no
// distributed path yet refuses with 0A000 instead (docs/scaleout.md lists them).
#pragma once

namespace whizbang::pg {

// True when wh_inbox_work is a Citus table in this database. Cached per backend; a change of
// the table (distribute() re-keys it) or of the whole relcache drops the cached answer.
bool distributed();

// ERROR 0A000 ("whizbang.<function> does not run on a distributed install yet") when
// distributed(); nothing was read or written then.
void refuse_if_distributed(const char* function);

}  // namespace whizbang::pg

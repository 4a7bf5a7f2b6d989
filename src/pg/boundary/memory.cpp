#include <malloc.h>

#include "pg/boundary/bridge.h"
#include "pg/boundary/memory.h"

namespace whizbang::pg {
namespace {

bool trim_pending = false;

// At commit, the query's portal (and with it the executor's and the function's memory) has
// been dropped already; at abort, AtAbort_Portals has freed it. What is left free in the heap
// is returned: malloc_trim(0) releases every whole free page, not only the top of the heap.
void trim_at_transaction_end(XactEvent event) {
    if (!trim_pending) return;
    if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT && event != XACT_EVENT_PREPARE) return;
    trim_pending = false;
    malloc_trim(0);
}

}  // namespace

void note_batch(std::size_t elements, std::size_t bytes) {
    if (elements < kTrimAfterElements && bytes < kTrimAfterBytes) return;
    trim_pending = true;
}

void memory_at_xact(XactEvent event) { trim_at_transaction_end(event); }

}  // namespace whizbang::pg

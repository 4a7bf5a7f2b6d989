#include <algorithm>

#include "pg/boundary/bridge.h"
#include "pg/boundary/postgres_headers.h"
#include "pg/ops/logical_slots.h"

extern "C" {
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
}

namespace whizbang::pg {

LogicalSlots logical_slots() {
    LogicalSlots out;
    pg_call([&] {
        const XLogRecPtr end = RecoveryInProgress() ? GetXLogReplayRecPtr(nullptr) : GetXLogInsertRecPtr();
        LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
        for (int i = 0; i < max_replication_slots; ++i) {
            ReplicationSlot* s = &ReplicationSlotCtl->replication_slots[i];
            if (!s->in_use || !SlotIsLogical(s) || s->data.database != MyDatabaseId) continue;
            SpinLockAcquire(&s->mutex);
            const bool lost = compat::slot_invalidated(s);
            const XLogRecPtr confirmed = s->data.confirmed_flush, restart = s->data.restart_lsn;
            SpinLockRelease(&s->mutex);
            if (lost) {
                ++out.invalidated;
                continue;
            }
            ++out.valid;
            if (!XLogRecPtrIsInvalid(confirmed) && end > confirmed)
                out.max_lag_bytes = std::max<int64_t>(out.max_lag_bytes, static_cast<int64_t>(end - confirmed));
            if (!XLogRecPtrIsInvalid(restart) && end > restart)
                out.max_retained_bytes = std::max<int64_t>(out.max_retained_bytes, static_cast<int64_t>(end - restart));
        }
        LWLockRelease(ReplicationSlotControlLock);
    });
    return out;
}

}  // namespace whizbang::pg

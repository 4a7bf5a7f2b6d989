// requeue and reschedule (DESIGN §3.11): an operator moves named work to a new due time — now,
// or p_at.
//
// Work under a live lease is someone's work in progress: it answers `leased` and stays, unless
// p_take_over: then the lease ends with this transaction (its holder's token answers
// lease_lost from then on, the delivery it had stays counted, and the rest of its run in the
// stream goes back behind the row, as for release_work). A lapsed lease is no lease, as for
// claims and cancel_work: it ends too. The row keeps its attempts and its place in its stream:
// a stream's rows still go out oldest first, so a later due time on a head holds the stream
// back, and an earlier one on a row behind the head changes nothing until it is the head.
#include <algorithm>
#include <map>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/spi.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/work_route.h"
#include "pg/claim/work.h"
#include "pg/lease/lease_store.h"
#include "pg/outcomes/named_work.h"
#include "pg/wait/work_wait.h"

namespace whizbang::pg {
namespace {

// The lease columns are cleared too: with the table store they hold the lease this call ended
// (with the shared-memory store they are empty already).
WorkPlan schedule_plan(
    "UPDATE whizbang.wh_inbox w"
    "   SET scheduled_for = u.due, lease_instance = NULL, lease_token = NULL, lease_expiry = NULL"
    "  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS u(id, due)"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.message_id OPERATOR(pg_catalog.=) u.id"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID, TIMESTAMPTZARRAYOID});

// Moves every named row that is not refused to `at` (requeue, at_arg < 0: to p_now, or keeps
// an earlier due time: work that is due already keeps its place); `done` is the outcome word.
void move_named(FunctionCallInfo fcinfo, const char* function, const char* done, int at_arg, int consumer_arg_no,
                int take_over_arg, int now_arg) {
    Named n;
    read_named(fcinfo, n, -1, false, consumer_arg_no, now_arg);
    require_not_null(fcinfo, take_over_arg, "p_take_over");
    const bool take_over = PG_GETARG_BOOL(take_over_arg);
    const TimestampTz at = at_arg < 0 ? n.now : timestamptz_arg(fcinfo, at_arg, "p_at");
    if (!n.ids.empty()) require_source_privileges(function, n.source);
    // Refused before a row is locked: SELECT ... FOR UPDATE's own error would name the statement.
    if (!n.ids.empty())
        pg_call([&] {
            PreventCommandIfReadOnly(function);
            PreventCommandDuringRecovery(function);
        });
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, function, n.source, n.ids, n.consumer);
        return;
    }
    SpiConnection spi;
    lock_named(n);
    std::vector<core::Uuid> moved;
    std::vector<TimestampTz> moved_to;
    std::vector<RunAfter> runs;
    std::vector<core::Uuid> counted;  // shared-memory leases ended: their deliveries last
    std::vector<int> counted_attempts;
    std::map<core::Uuid, Outcome> decided;  // an id named twice gets its first answer again
    auto outcomes = decide_all(n, false, [&](std::size_t i, Row& row) {
        const core::Uuid& id = n.ids[i];
        if (auto it = decided.find(id); it != decided.end()) return it->second;
        const bool live = row.lease_expiry && *row.lease_expiry > n.now;
        Outcome out{"leased", std::nullopt};
        if ((!live || take_over) && end_shared_lease(n, i)) {
            if (row.token) {
                add_run_after(n, row, runs);
                if (shared_leases_active()) {
                    counted.push_back(id);
                    counted_attempts.push_back(row.attempts);
                }
            }
            const TimestampTz due = at_arg < 0 ? std::min(row.due, at) : at;
            moved.push_back(id);
            moved_to.push_back(due);
            note_work(n.source, n.consumer, row.stream.value_or(id), due, n.now);
            out = Outcome{done, due};
        }
        decided[id] = out;
        return out;
    });
    if (!counted.empty())
        write_attempts(n.source, counted, std::vector<std::string>(counted.size(), n.consumer), counted_attempts);
    if (!moved.empty()) schedule_plan[n.source].execute({n.consumer_datum, uuid_array(moved), timestamptz_array(moved_to)});
    // The holder's run behind a row taken over goes back with it, refunded as release_work's.
    end_runs(n.source, runs, true);
    explain_not_found(function, n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
}

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// requeue(p_source, p_message_ids, p_consumer, p_take_over, p_now): due now.
WB_ROUTED_FUNCTION(wb_requeue, by_claimed_id) {
    move_named(fcinfo, "requeue", "requeued", -1, 2, 3, 4);
    return (Datum)0;
}

// reschedule(p_source, p_message_ids, p_at, p_consumer, p_take_over, p_now): due at p_at.
WB_ROUTED_FUNCTION(wb_reschedule, by_claimed_id) {
    move_named(fcinfo, "reschedule", "rescheduled", 2, 3, 4, 5);
    return (Datum)0;
}

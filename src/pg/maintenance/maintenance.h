// Retention (DESIGN §3.6): the purge tasks shared by perform_maintenance and the background
// worker. A task runs in batches; each batch is one or a few bounded statements, and a task
// remembers where it is, so a run over a big backlog reads every row once.
#pragma once

#include <vector>

#include <cstdint>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

enum class Task { purge_old_deduplication, purge_expired_idempotency, purge_dead_letters, purge_processed };
constexpr int kTaskCount = 4;
// The order the tasks run in (results are reported in Task order): the dedup purge last, since
// dropping a generation locks the table ACCESS EXCLUSIVE until the transaction ends; the other
// purges first also leave fewer waiting messages whose records must move forward.
constexpr Task kRunOrder[kTaskCount] = {Task::purge_expired_idempotency, Task::purge_dead_letters,
                                        Task::purge_processed, Task::purge_old_deduplication};

const char* task_name(Task task);

// Where a run of one task is, across its batches (and, in the worker, across transactions).
struct TaskRun {
    bool started = false, done = false, skipped = false;
    int phase = 0;             // tasks with several steps (results, then tombstones; inbox, then outbox)
    int64_t position = 0;      // where the next batch starts (a block number, or a time)
    int64_t end_block = 0;     // purge_old_deduplication: the table's size when the run began
    int64_t rows_per_block = 0;
    int64_t rows = 0;          // rows affected so far
    int64_t batches = 0;       // batches run so far (each in its own transaction outside perform_maintenance)
    double ms = 0;             // time spent so far
    // purge_old_deduplication on a table in generations (generation_retention.h)
    int64_t generations_dropped = 0, records_moved = 0;
};

// Runs one batch of `task` (of at most about batch_size rows) inside the current transaction,
// with SPI connected. The first batch takes the task's lock, a transaction-level advisory
// lock: when another transaction holds it, the run is marked skipped and done. Sets run.done
// when nothing is left.
void run_batch(Task task, TaskRun& run, TimestampTz now, int batch_size);

// One batch of every unfinished task, in the current transaction, with its own SPI connection:
// the unit of work the background worker and run_maintenance commit one at a time. Returns
// whether any task is left.
bool run_batches(TaskRun (&runs)[kTaskCount], TimestampTz now, int batch_size);

// The generations purge_old_deduplication dropped and the records it moved forward, as one
// message at `level` (NOTICE for the SQL calls, LOG for the worker); nothing when there were none.
void report_generations(const TaskRun& run, int level);

// A distributed install (docs/scaleout.md): perform_maintenance on the node of `anchor`
// (routing_anchors), which purges its shards and, once, its idempotency keys; its results are
// added to `runs` (one batch each). With SPI connected.
// `shard_anchors`: only these shards of the node (one partition each); all of them by default.
void run_on_node(TaskRun (&runs)[kTaskCount], int anchor, TimestampTz now, int batch_size,
                 const std::vector<int>* shard_anchors = nullptr);

// _PG_init (module.cpp): the settings every backend has; while preloading, the postmaster's
// whizbang.maintenance_databases, and the background workers it names.
void maintenance_define_settings();
void maintenance_preload_init();
void maintenance_register_workers();

}  // namespace whizbang::pg

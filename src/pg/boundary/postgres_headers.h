// The one place PostgreSQL's C headers enter C++ code. Include C++ and src/core headers
// before this one: PostgreSQL's port.h defines macros (snprintf, bind, unlink ...) that
// break the standard library when they are seen first.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"
#include "utils/wait_event.h"
}

#include "pg/boundary/pg_compat.h"  // the differences between majors

// port.h redirects these to PostgreSQL's own versions; C++ code below wants the standard ones.
#undef snprintf
#undef vsnprintf
#undef sprintf
#undef printf
#undef fprintf
#undef bind
#undef unlink

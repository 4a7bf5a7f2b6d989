// Memory of big calls goes back to the operating system (issue 10, docs/internals.md "Memory").
//
// A call's data lives in PostgreSQL memory contexts and C++ containers, both freed at the end of
// the call or query. But glibc's malloc keeps freed memory in the process heap: after a
// 200,000-message store a backend would keep ~160 MB it no longer uses, for the rest of its
// life. A call that reads a big batch says so here; at the end of its transaction, once the
// query's memory has been freed, malloc_trim(0) returns the free pages of the heap. Small calls
// pay nothing but a comparison.
#pragma once

#include <cstddef>

#include "pg/boundary/postgres_headers.h"

namespace whizbang::pg {

// A batch of this many elements, or of this many bytes, trims at the end of the transaction.
constexpr std::size_t kTrimAfterElements = 10000;
constexpr std::size_t kTrimAfterBytes = 16 * 1024 * 1024;

// Called by the readers of batch arguments (arrays, p_messages).
void note_batch(std::size_t elements, std::size_t bytes);

// The end of a transaction (module.cpp's dispatcher): the trim, when a batch asked for it.
void memory_at_xact(XactEvent event);

}  // namespace whizbang::pg

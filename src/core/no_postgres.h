// src/core is pure C++: it must build and be unit-tested without a server.
// PostgreSQL's headers define these guards; including one before a core header is a layering bug.
#pragma once
#if defined(POSTGRES_H) || defined(PG_CONFIG_H)
#error "src/core must not see PostgreSQL headers: include core headers first or move the code to src/pg"
#endif

// The lease store (DESIGN §3.8): leases in shared memory when whizbang is preloaded, in the
// work rows otherwise. lease_shm.cpp holds the shared-memory store.
#pragma once

namespace whizbang::pg {

// True in a server that loaded whizbang through shared_preload_libraries.
bool shared_leases_active();

}  // namespace whizbang::pg

// SPDX-License-Identifier: MIT
// Compiled, never run: the user-facing headers must not bring in the backend
// contract (Program, execute(), buffers, counters). A user program that trains
// a model includes only these.
#include "switchyard/switchyard.h"

#ifdef SWITCHYARD_BACKEND_API
#error "switchyard/switchyard.h includes a backend header (switchyard/backend/...)"
#endif

// Device is a handle: what a user can call on it.
static_assert(sizeof(&switchyard::Device::str) > 0);
static_assert(sizeof(&switchyard::Device::synchronize) > 0);

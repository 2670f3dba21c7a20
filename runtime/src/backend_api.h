// Internal: how the runtime finds backends. Each built-in backend provides a
// function returning its entry; GPU backends may also come as plugins.
#pragma once
#include "switchyard/device.h"

namespace switchyard::detail {
BackendEntry cpu_backend();
}  // namespace switchyard::detail

// SPDX-License-Identifier: MIT
// Switchyard: the whole public API.
#pragma once
#include "switchyard/amp.h"
#include "switchyard/custom.h"
#include "switchyard/data.h"
#include "switchyard/device.h"
#include "switchyard/error.h"
#include "switchyard/nn.h"
#include "switchyard/ops.h"
#include "switchyard/optim.h"
#include "switchyard/parallel.h"
#include "switchyard/serialize.h"
#include "switchyard/settings.h"
#include "switchyard/tensor.h"
#include "switchyard/version.h"

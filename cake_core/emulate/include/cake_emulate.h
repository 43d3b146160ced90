// CAKE's CPU runtime for lowered CUDA: build a file from `cake lower` with
//   g++ -std=c++20 -O2 -DCAKE_EMULATE -I <this directory> -x c++ kernel.cu -shared -fPIC
// and its launcher runs the kernel on the CPU (docs/emulation.md).  The kernel text and the
// prelude's plain C++ compile unchanged; what spells PTX is emulated here.
#pragma once
#ifndef CAKE_EMULATE
#error "cake_emulate.h is for host builds of lowered kernels: define CAKE_EMULATE"
#endif
#include "cake_emulate/cuda.h"
#include "cake_emulate/runtime.h"
#include "cake_emulate/memory.h"
#include "cake_emulate/sync.h"
#include "cake_emulate/async.h"
#include "cake_emulate/tensor_core.h"
#include "cake_emulate/helpers.h"
#include "cake_emulate/launch.h"

// The CUDA kernels' own sources, compiled for the CPU emulator (kernels/common/emu): the engine's
// variants and those that lost.
#include "mma.cu"
#include "staged.cu"
#include "variants/dp4a.cu"
#include "variants/persistent.cu"
#include "variants/row_lanes.cu"
#include "variants/shapes.cu"
#include "variants/variants.cu"

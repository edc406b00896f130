// The CUDA kernels' own sources, compiled for the CPU emulator (kernels/common/emu): the engine's
// variants and those that lost.
#include "dispatch.cu"
#include "variants/folded.cu"
#include "variants/look_ahead.cu"
#include "variants/pair_chains.cu"
#include "variants/prep_alongside.cu"
#include "variants/variants.cu"
#include "variants/wgmma.cu"

// The CUDA kernels' own sources, compiled for the CPU emulator (kernels/common/emu).
#include "kernel.cu"
#include "kernel_v1.cu"
#include "kernel_v2.cu"
#include "kernel_v3.cu"
#include "kernel_v6.cu"

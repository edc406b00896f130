// The CUDA kernel's own source, compiled for the CPU emulator (kernels/common/emu).
#include "kernel.cu"

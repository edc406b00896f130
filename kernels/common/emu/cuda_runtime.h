// In an emulated build, the CUDA runtime is the emulator (cuda_emu.h).
#pragma once
#include "cuda_emu.h"

// In an emulated build, halves come from the emulator (cuda_emu.h).
#pragma once
#include "cuda_emu.h"

// Precompiled header: the LibTorch headers most files need. Kept narrow on purpose.
#pragma once
#include <torch/torch.h>

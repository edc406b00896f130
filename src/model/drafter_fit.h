// Whether a speculative drafter fits the model it drafts for, from both files' facts: the checks
// the engine makes only by aborting (a width that differs fails a matrix product's assert, a
// target layer past the last one is never extracted) or not at all (a dflash drafter without a
// mask token drafts nothing, silently). serve and bench refuse a misfit before anything starts.
#pragma once

#include <string>

#include "model/gguf_facts.h"

namespace onebit {

// `kind` is serve's drafter option: "draft" (a model), "dflash", "eagle3" or "mtp" (`drafter` is
// then the head file's facts, or null for the model's own layer). Throws Error naming the file
// and what does not fit.
void check_drafter_fits(const std::string& kind, const ModelFacts* drafter, const ModelFacts& model);

}  // namespace onebit

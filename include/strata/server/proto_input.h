// The gRPC adapter's half of request translation: strata.v1.GenerateRequest -> GenerationInput,
// field by field, checking nothing (RequestTranslator checks everything, for every transport).
#pragma once

#include "strata/server/generation_input.h"
#include "strata/v1/generation.pb.h"

namespace strata::server {

GenerationInput InputFromProto(const v1::GenerateRequest& request);

}  // namespace strata::server

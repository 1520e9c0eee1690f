// ServingModel: everything strata-server serves one model with, loaded from a ServerConfig:
// the mapped GGUF file, its tokenizer and chat template, the backend (CreateBackend), the engine
// (not yet started) with the prefix cache pre-loaded, the request translator and the ModelInfo the
// GetModelInfo call returns.
//
// Ownership: the ServingModel owns all of it; members are declared in dependency order so they
// are destroyed engine first, file last. Thread rules: after LoadServingModel returns, only
// the engine changes (through its own thread-safe API); everything else is read-only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/backend/backend_factory.h"
#include "strata/common/status.h"
#include "strata/engine/engine.h"
#include "strata/model/gguf_file.h"
#include "strata/server/request_translator.h"
#include "strata/server/server_config.h"
#include "strata/tokenizer/chat_template.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/v1/generation.pb.h"

namespace strata::server {

struct ServingModel {
  std::unique_ptr<model::GgufFile> file;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<tokenizer::ChatTemplate> chat_template;  // null: the model has none
  std::unique_ptr<backend::Backend> backend;               // from CreateBackend: cpu or cuda
  // --speculative draft: the draft model, on the target's backend kind (the engine's proposer
  // drives it).
  std::unique_ptr<model::GgufFile> draft_file;
  std::unique_ptr<backend::Backend> draft_backend;
  std::unique_ptr<engine::Engine> engine;
  // Structured-output formats compiled over this model's vocabulary (the translator's).
  std::unique_ptr<OutputConstraints> output_constraints;
  std::unique_ptr<RequestTranslator> translator;
  v1::ModelInfo info;
  // What generation calls submit to: the engine, or a wrapper around it (the response cache,
  // set by the server when it is on; it must outlive the calls). Null: the engine.
  engine::RequestSubmitter* submitter = nullptr;
};

// Loads the model and builds the engine (not started). `step_observer` goes to
// EngineOptions::step_observer. Errors name what failed (the file, a setting, a preload line).
StatusOr<std::unique_ptr<ServingModel>> LoadServingModel(
    const ServerConfig& config,
    std::function<void(const engine::EngineStats&, bool)> step_observer);

// The backend settings of `config`: INVALID_ARGUMENT for an unknown --backend,
// --matmul-precision or --cuda-f16-weights (LoadServerConfig already refuses them; this is for
// configs built in code).
StatusOr<backend::BackendSpec> BackendSpecFromConfig(const ServerConfig& config);

// The prompts of a --preload-prompts file: one per line, with "\n" standing for a line break
// and "\\" for a backslash; blank lines are skipped. INVALID_ARGUMENT naming the line for an
// unknown escape.
StatusOr<std::vector<std::string>> ParsePreloadPrompts(const std::string& text);

// llama.cpp's name for a general.file_type value ("Q4_K_M" for 15), or "file type N".
std::string FileTypeName(int64_t file_type);

}  // namespace strata::server

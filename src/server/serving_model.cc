#include "strata/server/serving_model.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "strata/common/logging.h"
#include "strata/engine/draft_model_proposer.h"
#include "strata/engine/ngram_proposer.h"
#include "strata/engine/self_draft_calibration.h"
#include "strata/model/ggml_type.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "0.0.0"
#endif
#ifndef STRATA_COMMIT
#define STRATA_COMMIT "unknown"
#endif

namespace strata::server {
namespace {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A stable identity of the weights for prefix-cache keys: the file's size and its first
// metadata bytes would do; the path and size are enough to keep two models apart in one process.
uint64_t ModelSalt(const std::string& path, uint64_t size) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char c : path) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return (h ^ size) * 1099511628211ull;
}

}  // namespace

StatusOr<backend::BackendSpec> BackendSpecFromConfig(const ServerConfig& config) {
  backend::BackendSpec spec;
  STRATA_ASSIGN_OR_RETURN(spec.kind, backend::ParseBackendKind(config.backend));
  spec.block_size = config.kv_block_size;
  spec.kv_budget_bytes = config.kv_budget_bytes;
  spec.threads = config.threads;
  if (!backend::cpu::ParseKvDtype(config.kv_dtype, &spec.kv_dtype)) {
    return InvalidArgumentError("--kv-dtype must be f16, f32 or q8_0, got '" + config.kv_dtype +
                                "'");
  }
  if (!backend::cpu::ParseMatMulPrecisionSetting(config.matmul_precision, &spec.matmul_precision)) {
    return InvalidArgumentError("--matmul-precision must be fp32, int8 or auto, got '" +
                                config.matmul_precision + "'");
  }
  spec.device = config.device;
  spec.gpu_memory_fraction = config.gpu_memory_fraction;
  spec.cuda_graphs = config.cuda_graphs;
  StatusOr<backend::cuda::F16WeightCopies> copies =
      backend::ParseF16WeightCopies(config.cuda_f16_weights);
  if (!copies.ok()) {
    return InvalidArgumentError("--cuda-f16-weights must be auto, on or off, got '" +
                                config.cuda_f16_weights + "'");
  }
  spec.cuda_f16_weights = *copies;
  return spec;
}

std::string FileTypeName(int64_t file_type) {
  switch (file_type) {
    case 0:
      return "F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K";
    case 11:
      return "Q3_K_S";
    case 12:
      return "Q3_K_M";
    case 13:
      return "Q3_K_L";
    case 14:
      return "Q4_K_S";
    case 15:
      return "Q4_K_M";
    case 16:
      return "Q5_K_S";
    case 17:
      return "Q5_K_M";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    default:
      return "file type " + std::to_string(file_type);
  }
}

StatusOr<std::vector<std::string>> ParsePreloadPrompts(const std::string& text) {
  std::vector<std::string> prompts;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string prompt;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '\\') {
        prompt.push_back(line[i]);
        continue;
      }
      const char next = i + 1 < line.size() ? line[i + 1] : '\0';
      if (next == 'n') {
        prompt.push_back('\n');
      } else if (next == '\\') {
        prompt.push_back('\\');
      } else {
        return InvalidArgumentError("preload prompts line " + std::to_string(number) +
                                    ": unknown escape (use \\n or \\\\)");
      }
      ++i;
    }
    if (!prompt.empty()) prompts.push_back(std::move(prompt));
  }
  return prompts;
}

namespace {

// The draft model of --speculative draft, loaded into `m` beside the target, and its proposer.
StatusOr<std::shared_ptr<engine::Proposer>> LoadDraftProposer(const ServerConfig& config,
                                                              backend::BackendSpec spec,
                                                              ServingModel& m) {
  const std::string& path = config.speculative_draft_model;
  StatusOr<model::GgufFile> file = model::GgufFile::Open(path);
  if (!file.ok()) {
    return InvalidArgumentError("--speculative-draft-model " + path + ": " +
                                file.status().message());
  }
  m.draft_file = std::make_unique<model::GgufFile>(std::move(*file));
  // Same ids must mean the same tokens: the vocabularies must be equal, not just as long.
  StatusOr<std::unique_ptr<tokenizer::Tokenizer>> draft_tokenizer =
      tokenizer::Tokenizer::FromGguf(*m.draft_file);
  if (!draft_tokenizer.ok()) {
    return InvalidArgumentError("--speculative-draft-model " + path + ": " +
                                draft_tokenizer.status().message());
  }
  if ((*draft_tokenizer)->vocab().tokens != m.tokenizer->vocab().tokens) {
    return InvalidArgumentError("--speculative-draft-model " + path +
                                ": its vocabulary differs from the target model's");
  }
  spec.kind =
      m.backend->name() == "cuda" ? backend::BackendKind::kCuda : backend::BackendKind::kCpu;
  spec.kv_budget_bytes = config.speculative_draft_kv_bytes;
  StatusOr<std::unique_ptr<backend::Backend>> draft = backend::CreateBackend(*m.draft_file, spec);
  if (!draft.ok()) {
    return InvalidArgumentError("--speculative-draft-model " + path + ": " +
                                draft.status().message());
  }
  m.draft_backend = std::move(*draft);
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::DraftModelProposer> proposer,
      engine::DraftModelProposer::Create(m.draft_backend.get(), m.backend->config().vocab_size));
  LogInfo("draft model loaded", {{"model", path}, {"backend", m.draft_backend->Describe()}});
  return std::shared_ptr<engine::Proposer>(std::move(proposer));
}

// A calibration text for self-speculation: plain English prose, continued by the model.
constexpr char kSelfDraftCalibration[] =
    "The river town woke slowly. Fishermen pulled their boats onto the gravel, the baker "
    "opened his shutters, and children ran along the wall above the water, counting the gulls. "
    "By noon the market was full: apples from the hills, cheese wrapped in cloth, and";

// Self-speculation: the target's own first layers and head as the draft, on a second backend
// of the target's kind (on the CPU over the same mapped weights; on CUDA an upload of those
// layers and the head). Its layer count is the flag's, or measured.
StatusOr<std::shared_ptr<engine::Proposer>> LoadSelfDraftProposer(const ServerConfig& config,
                                                                  backend::BackendSpec spec,
                                                                  ServingModel& m) {
  const auto n_layers = static_cast<int32_t>(m.backend->config().n_layers);
  if (n_layers < 2) {
    return InvalidArgumentError("--speculative self needs a model of at least 2 layers");
  }
  if (config.speculative_self_layers >= n_layers) {
    return InvalidArgumentError("--speculative-self-layers must be below the model's " +
                                std::to_string(n_layers) + " layers, got " +
                                std::to_string(config.speculative_self_layers));
  }
  spec.kind =
      m.backend->name() == "cuda" ? backend::BackendKind::kCuda : backend::BackendKind::kCpu;
  spec.kv_budget_bytes = config.speculative_draft_kv_bytes;
  auto make = [&](int32_t layers) {
    backend::BackendSpec s = spec;
    s.max_layers = layers;
    return backend::CreateBackend(*m.file, s);
  };
  int32_t layers = config.speculative_self_layers;
  if (layers == 0) {
    std::vector<int32_t> candidates;
    for (int32_t k : {n_layers / 4, n_layers / 3, n_layers / 2, 2 * n_layers / 3}) {
      if (k >= 1 && k < n_layers &&
          std::find(candidates.begin(), candidates.end(), k) == candidates.end()) {
        candidates.push_back(k);
      }
    }
    const std::vector<int32_t> text =
        m.tokenizer->Encode(kSelfDraftCalibration, {/*add_special=*/true, /*parse_special=*/false});
    STRATA_ASSIGN_OR_RETURN(
        std::vector<engine::SelfDraftCandidate> measured,
        engine::MeasureSelfDrafts(*m.backend, make, candidates, text, /*continuation=*/32,
                                  config.speculative_tokens));
    for (const engine::SelfDraftCandidate& c : measured) {
      LogInfo("self-speculation candidate", {{"layers", std::to_string(c.layers)},
                                             {"agreement", std::to_string(c.agreement)},
                                             {"relative_cost", std::to_string(c.cost)},
                                             {"expected_speedup", std::to_string(c.speedup)}});
    }
    const engine::SelfDraftCandidate& best = engine::BestSelfDraft(measured);
    layers = best.layers;
    if (best.speedup <= 1.0) {
      LogWarn(
          "self-speculation is not expected to pay off on this model (the adaptive policy "
          "will keep drafts short or off)",
          {{"layers", std::to_string(best.layers)},
           {"expected_speedup", std::to_string(best.speedup)}});
    }
  }
  STRATA_ASSIGN_OR_RETURN(m.draft_backend, make(layers));
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::DraftModelProposer> proposer,
      engine::DraftModelProposer::Create(m.draft_backend.get(), m.backend->config().vocab_size));
  LogInfo("self-speculation draft",
          {{"layers", std::to_string(layers)}, {"of", std::to_string(n_layers)}});
  return std::shared_ptr<engine::Proposer>(std::move(proposer));
}

}  // namespace

StatusOr<std::unique_ptr<ServingModel>> LoadServingModel(
    const ServerConfig& config,
    std::function<void(const engine::EngineStats&, bool)> step_observer) {
  auto m = std::make_unique<ServingModel>();
  STRATA_ASSIGN_OR_RETURN(model::GgufFile file, model::GgufFile::Open(config.model));
  m->file = std::make_unique<model::GgufFile>(std::move(file));
  STRATA_ASSIGN_OR_RETURN(m->tokenizer, tokenizer::Tokenizer::FromGguf(*m->file));
  StatusOr<std::unique_ptr<tokenizer::ChatTemplate>> chat_template =
      tokenizer::ChatTemplateRegistry::Global().Resolve(config.chat_template,
                                                        m->tokenizer->vocab());
  if (chat_template.ok()) {
    m->chat_template = std::move(*chat_template);
  } else if (!config.chat_template.empty()) {
    return InvalidArgumentError("--chat-template: " + chat_template.status().message());
  } else {
    LogWarn("the model has no chat template Strata knows: chat input will be refused",
            {{"model", config.model}});
  }

  STRATA_ASSIGN_OR_RETURN(backend::BackendSpec spec, BackendSpecFromConfig(config));
  STRATA_ASSIGN_OR_RETURN(m->backend, backend::CreateBackend(*m->file, spec));
  const model::ModelConfig& model_config = m->backend->config();

  engine::EngineOptions engine_options;
  engine_options.scheduler.max_batched_tokens = config.max_batched_tokens;
  engine_options.scheduler.max_batch_size = config.max_batch_size;
  engine_options.scheduler.long_prefill_chunk = config.long_prefill_chunk;
  engine_options.scheduler.max_model_len = config.max_model_len;
  engine_options.max_queued_requests = static_cast<size_t>(config.max_queued_requests);
  engine_options.enable_prefix_caching = config.enable_prefix_caching;
  engine_options.model_salt = ModelSalt(config.model, m->file->file_size());
  engine_options.batching = config.batching == "adaptive" ? engine::BatchingMode::kAdaptive
                                                          : engine::BatchingMode::kStatic;
  engine_options.adaptive.target_itl_seconds = config.target_itl_ms / 1000.0;
  engine_options.adaptive.min_prefill_tokens = config.min_prefill_tokens;
  engine_options.constraint_mask_threads = config.constraint_mask_threads;
  engine_options.background_max_slowdown = config.batch_max_slowdown;
  if (config.speculative == "ngram") {
    engine::NgramProposerOptions ngram;
    ngram.min_ngram = config.speculative_ngram_min;
    ngram.max_ngram = config.speculative_ngram_max;
    STRATA_RETURN_IF_ERROR(ngram.Validate());
    engine_options.speculative.proposer = std::make_shared<engine::NgramProposer>(ngram);
  } else if (config.speculative == "draft") {
    STRATA_ASSIGN_OR_RETURN(engine_options.speculative.proposer,
                            LoadDraftProposer(config, spec, *m));
  } else if (config.speculative == "self") {
    STRATA_ASSIGN_OR_RETURN(engine_options.speculative.proposer,
                            LoadSelfDraftProposer(config, spec, *m));
  }
  if (engine_options.speculative.proposer != nullptr) {
    engine_options.speculative.proposer_name = config.speculative;
    engine_options.speculative.policy.max_draft_tokens = config.speculative_tokens;
    engine_options.speculative.policy.adaptive = config.speculative_adaptive;
  }
  engine_options.step_observer = std::move(step_observer);
  STRATA_ASSIGN_OR_RETURN(
      m->engine, engine::Engine::Create(m->backend.get(), m->tokenizer.get(), engine_options));

  if (!config.preload_prompts.empty()) {
    STRATA_ASSIGN_OR_RETURN(std::string text, ReadFile(config.preload_prompts));
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> prompts, ParsePreloadPrompts(text));
    for (size_t i = 0; i < prompts.size(); ++i) {
      Status status = m->engine->Preload(
          m->tokenizer->Encode(prompts[i], {/*add_special=*/true, /*parse_special=*/false}));
      if (!status.ok()) {
        return InvalidArgumentError("--preload-prompts: prompt " + std::to_string(i + 1) + ": " +
                                    status.message());
      }
    }
    LogInfo("prefix cache preloaded", {{"prompts", std::to_string(prompts.size())}});
  }

  const int64_t context =
      config.max_model_len > 0 ? config.max_model_len : model_config.context_length;
  TranslatorLimits limits;
  limits.max_prompt_bytes = static_cast<size_t>(config.max_message_bytes);
  limits.context_tokens = context;
  limits.default_max_tokens = config.default_max_tokens;
  m->output_constraints = std::make_unique<OutputConstraints>(m->tokenizer.get());
  // After the backend's start-up measurements, which want the cores to themselves.
  m->output_constraints->BuildVocabularyInBackground();
  m->translator = std::make_unique<RequestTranslator>(m->tokenizer.get(), m->chat_template.get(),
                                                      limits, m->output_constraints.get());

  v1::ModelInfo& info = m->info;
  StatusOr<std::string_view> name = m->file->GetString("general.name");
  info.set_name(name.ok() ? std::string(*name) : config.model);
  info.set_architecture(model_config.arch_name);
  uint64_t parameters = 0;
  for (const model::GgufTensorInfo& t : m->file->tensors()) parameters += t.num_elements;
  info.set_parameters(static_cast<int64_t>(parameters));
  StatusOr<int64_t> file_type = m->file->GetInt("general.file_type");
  info.set_quantization(file_type.ok() ? FileTypeName(*file_type) : "unknown");
  info.set_context_length(static_cast<int32_t>(context));
  info.set_vocab_size(static_cast<int32_t>(model_config.vocab_size));
  info.set_chat_template(m->chat_template ? std::string(m->chat_template->name()) : "");
  info.set_max_batch_size(config.max_batch_size);
  // The most tokens a step may carry: the static budget, or the adaptive budget's ceiling.
  info.set_max_batched_tokens(engine_options.batching == engine::BatchingMode::kAdaptive
                                  ? engine_options.adaptive.max_budget
                                  : config.max_batched_tokens);
  const engine::EngineStats stats = m->engine->Stats();
  info.set_kv_cache_tokens(int64_t{stats.kv.num_blocks} * config.kv_block_size);
  info.set_max_queued_requests(static_cast<int32_t>(config.max_queued_requests));
  info.set_backend(m->backend->Describe());
  info.set_version(std::string(STRATA_VERSION) + " (" + STRATA_COMMIT + ")");
  return m;
}

}  // namespace strata::server

// strata-generate: writes text from a model on any backend (--backend), streaming as it is
// produced, and ends with the prompt and generation speeds.
//
//   strata-generate --model MODEL.gguf (--prompt TEXT | --chat TEXT [--system TEXT]) [flags]
//
// Run with --help for the flags. Errors: one line on stderr, exit code 1 (2 for bad usage).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "strata/backend/backend_factory.h"
#include "strata/backend/backend_flags.h"
#include "strata/common/tool_args.h"
#include "strata/engine/generator.h"
#include "strata/model/gguf_file.h"
#include "strata/sampling/sampling_params.h"
#include "strata/tokenizer/chat_template.h"
#include "strata/tokenizer/tokenizer.h"

namespace {

constexpr char kUsage[] =
    "usage: strata-generate --model MODEL.gguf (--prompt TEXT | --chat TEXT) [flags]\n"
    "  --prompt TEXT            raw text (BOS added as the vocab asks)\n"
    "  --chat TEXT              a user message rendered with the model's chat template\n"
    "  --system TEXT            a system message for --chat\n"
    "  --chat-template NAME     template name (default: detected from the model)\n"
    "  --max-tokens N           tokens to generate (default 128)\n"
    "  --temperature F          0 = greedy (default 0)\n"
    "  --top-k N  --top-p F  --min-p F\n"
    "  --repetition-penalty F  --presence-penalty F  --frequency-penalty F\n"
    "  --seed N                 sampling seed (default 0)\n"
    "  --stop TEXT              stop string (repeatable)\n"
    "  --ignore-eos             keep going past end-of-generation tokens\n"
    "  --prefill-chunk N        prompt tokens per forward pass (default 512)\n"
    "  --quiet                  print only the generated text\n"
    "backend:\n";

constexpr strata::ToolArgs kArgs("strata-generate", /*usage_exit_code=*/2);

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, prompt, chat, system, template_name;
  bool quiet = false;
  int64_t prefill_chunk = 512;
  strata::sampling::SamplingParams params;
  params.temperature = 0;
  params.max_tokens = 128;
  strata::backend::BackendSpec spec;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(strata::backend::kBackendFlagsUsage, stdout);
      return 0;
    }
    if (flag == "--quiet") {
      quiet = true;
      continue;
    }
    if (flag == "--ignore-eos") {
      params.ignore_eos = true;
      continue;
    }
    if (i + 1 >= argc) kArgs.Fail(flag + " needs a value (see --help)", 2);
    const char* v = argv[++i];
    if (strata::backend::IsBackendFlag(flag)) {
      if (auto applied = strata::backend::ApplyBackendFlag(flag, v, &spec); !applied.ok()) {
        kArgs.Fail(applied.message(), 2);
      }
    } else if (flag == "--model")
      model_path = v;
    else if (flag == "--prompt")
      prompt = v;
    else if (flag == "--chat")
      chat = v;
    else if (flag == "--system")
      system = v;
    else if (flag == "--chat-template")
      template_name = v;
    else if (flag == "--max-tokens")
      params.max_tokens = static_cast<int32_t>(kArgs.Int(flag, v));
    else if (flag == "--temperature")
      params.temperature = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--top-k")
      params.top_k = static_cast<int32_t>(kArgs.Int(flag, v));
    else if (flag == "--top-p")
      params.top_p = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--min-p")
      params.min_p = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--repetition-penalty")
      params.repetition_penalty = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--presence-penalty")
      params.presence_penalty = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--frequency-penalty")
      params.frequency_penalty = static_cast<float>(kArgs.Number(flag, v));
    else if (flag == "--seed")
      params.seed = static_cast<uint64_t>(kArgs.Int(flag, v));
    else if (flag == "--stop")
      params.stop.push_back(v);
    else if (flag == "--prefill-chunk")
      prefill_chunk = kArgs.Int(flag, v);
    else {
      kArgs.Fail("unknown flag " + flag + " (see --help)", 2);
    }
  }
  if (model_path.empty()) kArgs.Fail("--model is required (see --help)", 2);
  if (prompt.empty() == chat.empty()) kArgs.Fail("give exactly one of --prompt and --chat", 2);

  auto file = strata::model::GgufFile::Open(model_path);
  if (!file.ok()) kArgs.Fail(file.status().ToString());
  auto tokenizer = strata::tokenizer::Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) kArgs.Fail(tokenizer.status().ToString());
  auto backend = strata::backend::CreateBackend(*file, spec);
  if (!backend.ok()) kArgs.Fail(backend.status().ToString());

  std::vector<int32_t> ids;
  if (!chat.empty()) {
    auto chat_template = strata::tokenizer::ChatTemplateRegistry::Global().Resolve(
        template_name, (*tokenizer)->vocab());
    if (!chat_template.ok()) kArgs.Fail(chat_template.status().ToString());
    std::vector<strata::tokenizer::ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", chat});
    strata::tokenizer::ChatRenderOptions render;
    auto text = (*chat_template)->Render(messages, render);
    if (!text.ok()) kArgs.Fail(text.status().ToString());
    ids = (*tokenizer)->Encode(*text, {/*add_special=*/true, /*parse_special=*/true});
  } else {
    ids = (*tokenizer)->Encode(prompt, {/*add_special=*/true, /*parse_special=*/false});
  }

  strata::engine::Generator generator(backend->get(), tokenizer->get(), prefill_chunk);
  if (!quiet && !prompt.empty()) {
    std::fputs(prompt.c_str(), stdout);
  }
  auto result = generator.Generate(ids, params, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputs("\n", stdout);
  if (!result.ok()) kArgs.Fail(result.status().ToString());
  if (!quiet) {
    const auto& s = result->stats;
    // The first sampled token comes from the prefill; decode steps produce the rest.
    const double decode_tokens = static_cast<double>(s.generated_tokens - 1);
    std::fprintf(stderr,
                 "[strata] finish: %s | prompt: %lld tokens in %.3f s (%.1f tokens/s) | "
                 "generation: %lld tokens in %.3f s (%.1f tokens/s) | %s\n",
                 std::string(strata::sampling::FinishReasonName(result->finish_reason)).c_str(),
                 static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
                 s.prefill_seconds > 0 ? s.prompt_tokens / s.prefill_seconds : 0.0,
                 static_cast<long long>(s.generated_tokens), s.decode_seconds,
                 s.decode_seconds > 0 ? decode_tokens / s.decode_seconds : 0.0,
                 (*backend)->Describe().c_str());
  }
  return 0;
}

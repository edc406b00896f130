#include "ollama/ollama_reply.h"

#include <limits>

#include <gtest/gtest.h>

#include "ollama/ollama_models.h"

namespace onebit {
namespace {

using nlohmann::json;

std::string sse(const json& data) { return "data: " + data.dump() + "\n\n"; }

json delta(const std::string& text) {
  return {{"choices", {{{"index", 0}, {"finish_reason", nullptr}, {"delta", {{"content", text}}}}}}};
}

const json kTimings = {{"cache_n", 2},      {"prompt_n", 5},      {"prompt_ms", 1.5},
                       {"predicted_n", 3},  {"predicted_ms", 12.25}};

std::vector<json> lines(const std::string& ndjson) {
  std::vector<json> out;
  size_t pos = 0, end;
  while ((end = ndjson.find('\n', pos)) != std::string::npos) {
    out.push_back(json::parse(ndjson.substr(pos, end - pos)));
    pos = end + 1;
  }
  EXPECT_EQ(pos, ndjson.size()) << "a line without its newline";
  return out;
}

}  // namespace

TEST(OllamaReply, DurationsFromTimings) {
  EXPECT_EQ(ollama_durations(kTimings, 90000000, 4000),
            (json{{"total_duration", 90000000}, {"load_duration", 4000}, {"prompt_eval_count", 7},
                  {"prompt_eval_duration", 1500000}, {"eval_count", 3}, {"eval_duration", 12250000}}));
  EXPECT_EQ(ollama_durations(json::object(), 1, 0)["eval_count"], 0);
}

// Numbers no engine sends still give numbers: no float-to-integer conversion out of range, no
// overflow adding two counts.
TEST(OllamaReply, DurationsFromNumbersOutOfRange) {
  const json odd = {{"prompt_ms", 1e300},  {"predicted_ms", -5.0},
                    {"prompt_n", 1.5e300}, {"cache_n", std::numeric_limits<int64_t>::max()},
                    {"predicted_n", -3}};
  const json d = ollama_durations(odd, 1, 0);
  EXPECT_EQ(d["prompt_eval_duration"], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(d["eval_duration"], 0);
  EXPECT_EQ(d["prompt_eval_count"], 0);
  EXPECT_EQ(d["eval_count"], 0);
}

TEST(OllamaReply, Time) {
  using namespace std::chrono;
  EXPECT_EQ(ollama_time(system_clock::time_point(microseconds(1700000000123456))), "2023-11-14T22:13:20.123456Z");
}

TEST(OllamaReply, StreamBecomesNdjsonAsItArrives) {
  OllamaReply r(ReplyKind::kChat, "1bit-tiny", true, std::chrono::steady_clock::now(), 0);
  EXPECT_EQ(r.begin(200), "application/x-ndjson");
  // Half an event says nothing yet; the rest gives its line at once.
  const std::string first = sse(delta("Hel"));
  EXPECT_EQ(r.feed(first.substr(0, 10)), "");
  std::vector<json> got = lines(r.feed(first.substr(10)));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["model"], "1bit-tiny");
  EXPECT_EQ(got[0]["message"], (json{{"role", "assistant"}, {"content", "Hel"}}));
  EXPECT_EQ(got[0]["done"], false);
  EXPECT_EQ(got[0]["created_at"].get<std::string>().size(), 27u);
  // Pings and empty deltas say nothing; the finish comes with the timings, the last line at [DONE].
  json last = {{"choices", {{{"index", 0}, {"finish_reason", "length"}, {"delta", json::object()}}}}, {"timings", kTimings}};
  got = lines(r.feed(": ping\n\n" + sse(delta("lo")) + sse(delta("")) + sse(last) + "data: [DONE]\n\n"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["message"]["content"], "lo");
  EXPECT_EQ(got[1]["done"], true);
  EXPECT_EQ(got[1]["done_reason"], "length");
  EXPECT_EQ(got[1]["message"]["content"], "");
  EXPECT_EQ(got[1]["eval_count"], 3);
  EXPECT_EQ(got[1]["prompt_eval_duration"], 1500000);
  EXPECT_GT(got[1]["total_duration"].get<int64_t>(), 0);
  EXPECT_EQ(r.end(), "");
}

TEST(OllamaReply, GenerateStreamUsesResponse) {
  OllamaReply r(ReplyKind::kGenerate, "m", true, std::chrono::steady_clock::now(), 0);
  r.begin(200);
  json text = {{"choices", {{{"index", 0}, {"text", " return"}, {"finish_reason", nullptr}}}}};
  std::vector<json> got = lines(r.feed(sse(text) + "data: [DONE]\n\n"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["response"], " return");
  EXPECT_FALSE(got[0].contains("message"));
  EXPECT_EQ(got[1]["done_reason"], "stop");
}

TEST(OllamaReply, StreamedToolCallsComeWhole) {
  OllamaReply r(ReplyKind::kChat, "m", true, std::chrono::steady_clock::now(), 0);
  r.begin(200);
  auto call = [](json fn) {
    return json{{"choices", {{{"index", 0}, {"delta", {{"tool_calls", {{{"index", 0}, {"function", fn}}}}}}}}}};
  };
  std::string in = sse(call({{"name", "weather"}, {"arguments", "{\"city\":"}})) + sse(call({{"arguments", "\"Oslo\"}"}}));
  EXPECT_EQ(r.feed(in), "");
  std::vector<json> got = lines(r.feed("data: [DONE]\n\n"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["message"]["tool_calls"], (json{{{"function", {{"name", "weather"}, {"arguments", {{"city", "Oslo"}}}}}}}));
}

TEST(OllamaReply, ErrorsInOllamasShape) {
  OllamaReply whole(ReplyKind::kChat, "m", false, std::chrono::steady_clock::now(), 0);
  EXPECT_EQ(whole.begin(400), "application/json; charset=utf-8");
  EXPECT_EQ(whole.feed(R"({"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}})"), "");
  EXPECT_EQ(whole.end(), R"({"error":"the request exceeds the available context size"})");
  // In a stream: the engine's error event is the last line.
  OllamaReply stream(ReplyKind::kChat, "m", true, std::chrono::steady_clock::now(), 0);
  stream.begin(200);
  EXPECT_EQ(stream.feed(sse({{"error", {{"message", "boom"}}}}) + sse(delta("late"))), "{\"error\":\"boom\"}\n");
  EXPECT_EQ(stream.end(), "");
  // A stream that stops early says so.
  OllamaReply cut(ReplyKind::kChat, "m", true, std::chrono::steady_clock::now(), 0);
  cut.begin(200);
  cut.feed(sse(delta("a")));
  EXPECT_EQ(cut.end(), "{\"error\":\"the engine's stream ended before its last event\"}\n");
}

TEST(OllamaReply, WholeAnswers) {
  OllamaReply chat(ReplyKind::kChat, "m", false, std::chrono::steady_clock::now(), 25);
  chat.begin(200);
  chat.feed(json{{"choices", {{{"index", 0}, {"finish_reason", "stop"},
                              {"message", {{"role", "assistant"}, {"content", "Hi."}, {"reasoning_content", "greet"}}}}}},
                 {"timings", kTimings}}
                .dump());
  json j = json::parse(chat.end());
  EXPECT_EQ(j["message"], (json{{"role", "assistant"}, {"content", "Hi."}, {"thinking", "greet"}}));
  EXPECT_EQ(j["done"], true);
  EXPECT_EQ(j["done_reason"], "stop");
  EXPECT_EQ(j["load_duration"], 25);
  EXPECT_EQ(j["prompt_eval_count"], 7);

  OllamaReply embed(ReplyKind::kEmbed, "e", false, std::chrono::steady_clock::now(), 0);
  embed.begin(200);
  const json vectors = {{"data", {{{"index", 1}, {"embedding", {0.5, 0.5}}}, {{"index", 0}, {"embedding", {1.0, 0.0}}}}},
                        {"usage", {{"prompt_tokens", 4}}}};
  embed.feed(vectors.dump());
  j = json::parse(embed.end());
  EXPECT_EQ(j["embeddings"], (json{{1.0, 0.0}, {0.5, 0.5}}));
  EXPECT_EQ(j["prompt_eval_count"], 4);
  OllamaReply legacy(ReplyKind::kEmbeddings, "e", false, std::chrono::steady_clock::now(), 0);
  legacy.begin(200);
  legacy.feed(vectors.dump());
  EXPECT_EQ(json::parse(legacy.end()), (json{{"embedding", {1.0, 0.0}}}));
}

TEST(OllamaReply, LoadAndUnloadReplies) {
  json j = ollama_load_reply("m", ReplyKind::kGenerate, "unload");
  EXPECT_EQ(j["response"], "");
  EXPECT_EQ(j["done_reason"], "unload");
  EXPECT_EQ(ollama_load_reply("m", ReplyKind::kChat, "load")["message"]["role"], "assistant");
}

TEST(OllamaModels, Entries) {
  OllamaModel m;
  m.name = "1bit-tiny";
  m.facts.path = "/models/1bit-tiny.gguf";
  m.facts.architecture = "llama";
  m.facts.file_type = 7;
  m.facts.file_size = 1000;
  m.facts.context_length = 2048;
  m.kind = "llm";
  const json tag = ollama_tag(m);
  EXPECT_EQ(tag["name"], "1bit-tiny");
  EXPECT_EQ(tag["details"]["family"], "llama");
  EXPECT_EQ(tag["details"]["quantization_level"], "Q8_0");
  EXPECT_EQ(tag["digest"].get<std::string>().size(), 64u);
  m.modified_ns = 1;
  EXPECT_NE(ollama_tag(m)["digest"], tag["digest"]);  // another file version, another digest
  const json show = ollama_show(m, nullptr);
  EXPECT_EQ(show["model_info"]["llama.context_length"], 2048);
  EXPECT_EQ(show["capabilities"], json::array({"completion"}));
  OllamaRunning r{m, std::nullopt, false, {512, 32000000, 900}};
  const json ps = ollama_ps_entry(r);
  EXPECT_EQ(ps["context_length"], 512);
  EXPECT_EQ(ps["size"], 900);
  EXPECT_EQ(ps["size_vram"], 0);
  EXPECT_EQ(ps["details"]["parameter_size"], "32M");
  EXPECT_EQ(parameter_size(8030261248), "8.0B");
  EXPECT_EQ(engine_meta(json::parse(R"({"data":[{"meta":{"n_ctx":4096,"n_params":7,"size":9}}]})")).context, 4096u);
}

}  // namespace onebit

#include "ollama/ollama_api.h"

#include <gtest/gtest.h>

namespace onebit {
namespace {

using nlohmann::json;

// The status and message of the OllamaError that `f` throws.
template <typename F>
std::pair<int, std::string> refusal(F f) {
  try {
    f();
  } catch (const OllamaError& e) {
    return {e.status, e.what()};
  }
  return {0, ""};
}

}  // namespace

TEST(OllamaApi, BadBodiesAreOneClearError) {
  EXPECT_EQ(refusal([] { parse_ollama_request("{\"model\": "); }),
            std::make_pair(400, std::string("the request body is not valid JSON")));
  EXPECT_EQ(refusal([] { parse_ollama_request("[1]"); }).second, "the request body must be a JSON object");
  EXPECT_EQ(parse_ollama_request(""), json::object());
  EXPECT_EQ(refusal([] { chat_call({{"messages", json::array()}}); }),
            std::make_pair(400, std::string("model is required")));
  EXPECT_EQ(refusal([] { chat_call({{"model", 3}}); }).second, "model must be a string");
  EXPECT_EQ(refusal([] { chat_call({{"model", "m"}, {"stream", "yes"}}); }).second, "stream must be true or false");
  EXPECT_EQ(refusal([] { chat_call({{"model", "m"}, {"messages", {{{"content", "hi"}}}}}); }).second,
            "messages[0].role is required");
}

TEST(OllamaApi, ImagesAreRefused) {
  const std::string why = "images are not supported: 1bit runs text-only models, without a vision projector";
  const json chat = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "what is it?"}, {"images", {"iVBOR"}}}}}};
  EXPECT_EQ(refusal([&] { chat_call(chat); }), std::make_pair(400, why));
  EXPECT_EQ(refusal([] { generate_call({{"model", "m"}, {"prompt", "p"}, {"images", {"iVBOR"}}}); }).second, why);
  // An empty list asks for nothing.
  EXPECT_NO_THROW(generate_call({{"model", "m"}, {"prompt", "p"}, {"images", json::array()}}));
}

TEST(OllamaApi, ModelNames) {
  EXPECT_EQ(requested_model({{"model", "1bit-tiny:latest"}}), "1bit-tiny");
  EXPECT_EQ(requested_model({{"name", "1bit-tiny"}}), "1bit-tiny");  // the older field
  EXPECT_EQ(requested_model({{"model", "qwen3:8b"}}), "qwen3:8b");
}

TEST(OllamaApi, OptionsBecomeEngineFields) {
  json body = json::object();
  apply_options({{"num_predict", 12}, {"temperature", 0}, {"top_p", 0.9}, {"top_k", 40}, {"min_p", 0.05},
                 {"seed", 7}, {"stop", {"\n\n", "User:"}}, {"repeat_penalty", 1.1}, {"num_keep", 4},
                 {"num_ctx", 8192}, {"num_gpu", 99}, {"unknown_knob", 1}},
                body);
  EXPECT_EQ(body, (json{{"max_tokens", 12}, {"temperature", 0}, {"top_p", 0.9}, {"top_k", 40}, {"min_p", 0.05},
                        {"seed", 7}, {"stop", {"\n\n", "User:"}}, {"repeat_penalty", 1.1}, {"n_keep", 4}}));
  json unlimited = json::object();
  apply_options({{"num_predict", -1}, {"stop", "END"}}, unlimited);
  EXPECT_EQ(unlimited, (json{{"stop", {"END"}}}));
  EXPECT_EQ(refusal([] {
              json b;
              apply_options({{"top_k", 0.5}}, b);
            }).second,
            "options.top_k must be an integer");
  EXPECT_EQ(refusal([] {
              json b;
              apply_options({{"stop", {1}}}, b);
            }).second,
            "options.stop must be a list of strings");
}

TEST(OllamaApi, ChatCall) {
  const EngineCall c = chat_call({{"model", "m"},
                                  {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}},
                                  {"options", {{"temperature", 0}, {"num_predict", 8}}},
                                  {"format", "json"},
                                  {"think", false},
                                  {"keep_alive", "10m"}});
  EXPECT_EQ(c.path, "/v1/chat/completions");
  EXPECT_TRUE(c.stream);  // Ollama streams unless told not to
  EXPECT_TRUE(c.chat_reply);
  EXPECT_FALSE(c.empty);
  EXPECT_EQ(c.body, (json{{"model", "m"},
                          {"stream", true},
                          {"temperature", 0},
                          {"max_tokens", 8},
                          {"response_format", {{"type", "json_object"}, {"schema", {{"type", "object"}}}}},
                          {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}},
                          {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_EQ(c.keep_alive.duration, std::chrono::minutes(10));
  EXPECT_TRUE(chat_call({{"model", "m"}}).empty);
}

TEST(OllamaApi, JsonSchemaFormat) {
  const json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}, {"required", {"age"}}};
  const EngineCall c = chat_call({{"model", "m"}, {"stream", false}, {"format", schema}, {"messages", json::array()}});
  EXPECT_FALSE(c.stream);
  EXPECT_EQ(c.body["response_format"],
            (json{{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", schema}}}}));
  EXPECT_EQ(refusal([] { chat_call({{"model", "m"}, {"format", "yaml"}}); }).second,
            "format must be \"json\" or a JSON schema object, not \"yaml\"");
}

TEST(OllamaApi, ToolCallsInHistory) {
  const EngineCall c = chat_call(
      {{"model", "m"},
       {"tools", {{{"type", "function"}, {"function", {{"name", "weather"}}}}}},
       {"messages",
        {{{"role", "assistant"}, {"content", ""}, {"tool_calls", {{{"function", {{"name", "weather"}, {"arguments", {{"city", "Oslo"}}}}}}}}},
         {{"role", "tool"}, {"content", "cold"}}}}});
  EXPECT_EQ(c.body["tools"][0]["function"]["name"], "weather");
  EXPECT_EQ(c.body["messages"][0]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
  EXPECT_EQ(c.body["messages"][1], (json{{"role", "tool"}, {"content", "cold"}}));
}

TEST(OllamaApi, GenerateCall) {
  const EngineCall templated = generate_call({{"model", "m"}, {"prompt", "Why?"}, {"system", "Answer in one word."}});
  EXPECT_EQ(templated.path, "/v1/chat/completions");
  EXPECT_FALSE(templated.chat_reply);
  EXPECT_EQ(templated.body["messages"],
            (json{{{"role", "system"}, {"content", "Answer in one word."}}, {{"role", "user"}, {"content", "Why?"}}}));
  const EngineCall raw = generate_call({{"model", "m"}, {"prompt", "def add(a, b):"}, {"raw", true}, {"stream", false}});
  EXPECT_EQ(raw.path, "/v1/completions");
  EXPECT_EQ(raw.body, (json{{"model", "m"}, {"stream", false}, {"prompt", "def add(a, b):"}}));
  EXPECT_TRUE(generate_call({{"model", "m"}}).empty);
  EXPECT_EQ(refusal([] { generate_call({{"model", "m"}, {"context", {1, 2}}}); }).first, 400);
  EXPECT_EQ(refusal([] { generate_call({{"model", "m"}, {"suffix", "}"}}); }).first, 400);
}

TEST(OllamaApi, EmbedCalls) {
  const EngineCall list = embed_call({{"model", "e"}, {"input", {"a", "b"}}}, false);
  EXPECT_EQ(list.path, "/v1/embeddings");
  EXPECT_FALSE(list.stream);
  EXPECT_EQ(list.body, (json{{"model", "e"}, {"input", {"a", "b"}}, {"encoding_format", "float"}}));
  EXPECT_EQ(embed_call({{"model", "e"}, {"prompt", "a"}}, true).body["input"], "a");
  EXPECT_TRUE(embed_call({{"model", "e"}, {"prompt", ""}}, true).empty);
  EXPECT_EQ(refusal([] { embed_call({{"model", "e"}, {"input", {1}}}, false); }).second,
            "input must be a string or a list of strings");
}

TEST(OllamaApi, KeepAlive) {
  using std::chrono::milliseconds;
  EXPECT_FALSE(parse_keep_alive(json::object()).given);
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", 0}}).unload_now());
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", "0"}}).unload_now());
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", "0s"}}).unload_now());
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", -1}}).forever);
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", "-1m"}}).forever);
  EXPECT_EQ(parse_keep_alive({{"keep_alive", 90}}).duration, milliseconds(90000));
  EXPECT_EQ(parse_keep_alive({{"keep_alive", "1h30m"}}).duration, milliseconds(5400000));
  EXPECT_EQ(parse_keep_alive({{"keep_alive", "500ms"}}).duration, milliseconds(500));
  EXPECT_EQ(parse_keep_alive({{"keep_alive", "3600"}}).duration, milliseconds(3600000));
  EXPECT_EQ(parse_keep_alive({{"keep_alive", "1.5m"}}).duration, milliseconds(90000));
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", 1e300}}).forever);
  EXPECT_TRUE(parse_keep_alive({{"keep_alive", std::string(400, '9') + "h"}}).forever);
  for (const json& bad : {json("soon"), json("5x"), json(""), json(true), json("1h5"), json("."), json("m"),
                          json("1..5s"), json("1.2.3s"), json("-")})
    EXPECT_EQ(refusal([&] { parse_keep_alive({{"keep_alive", bad}}); }).first, 400) << bad;
}

}  // namespace onebit

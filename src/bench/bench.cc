#include "bench/bench.h"

#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "base/embedded.h"
#include "base/error.h"
#include "base/shell.h"
#include "bench/machine.h"
#include "engine/engine_process.h"
#include "http/conn.h"
#include "http/net.h"
#include "model/gguf_facts.h"

namespace onebit {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Prompts for decode speed: code, prose and a short one.
const char* const kCodePrompt =
    "def merge_sorted(left, right):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n";
const char* const kProsePrompt =
    "The lighthouse keeper had kept the lamp burning for forty years. On the night of the storm,";
const char* const kShortPrompt = "Hello";

// A long prompt of plain words, the same every run: about 1800 tokens for 8000 characters with
// the usual BPE vocabularies.
std::string generated_prompt(int chars) {
  static const char* const words[] = {
      "the", "engine", "reads", "a", "model", "file", "and", "measures", "how", "fast", "it", "runs", "on",
      "this", "machine", "before", "any", "setting", "is", "kept", "with", "its", "number", "every", "token",
      "counts", "when", "prompts", "grow", "long", "memory", "bandwidth", "decides", "speed", "of", "decode"};
  std::string out;
  uint64_t s = 0x1b17;
  int sentence = 0;
  while (static_cast<int>(out.size()) < chars) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out += words[(s >> 33) % (sizeof(words) / sizeof(words[0]))];
    out += (++sentence % 12 == 0) ? ". " : " ";
  }
  out.resize(static_cast<size_t>(chars));
  return out;
}

std::string read_prompt(const BenchOptions& o) {
  if (o.prompt_file.empty()) return generated_prompt(o.prompt_chars);
  std::ifstream in(o.prompt_file, std::ios::binary);
  if (!in) throw Error(o.prompt_file + ": cannot read the prompt file");
  std::ostringstream s;
  s << in.rdbuf();
  if (s.str().empty()) throw Error(o.prompt_file + ": the prompt file is empty");
  return s.str();
}

// A `1bit serve` for one configuration and round, stopped on destruction.
class Server {
 public:
  Server(const BenchOptions& o, const BenchConfig& c, int round, const std::atomic<bool>& stop) {
    const std::string log = o.log_dir.empty() ? "" : o.log_dir + "/" + c.name + "-round" + std::to_string(round) + ".log";
    EngineLaunch launch;
    launch.name = "config " + c.name + ": serve";
    launch.command = [&](int port) {
      std::vector<std::string> args = {"serve", "-m", o.model, "--port", std::to_string(port), "--load-timeout",
                                       std::to_string(o.load_timeout_s), "-v"};
      args.insert(args.end(), c.args.begin(), c.args.end());
      // Bench's clients send no key: a key in the user's environment must not lock them out.
      return ChildSpec{o.onebit, args, c.env, {"ONEBIT_API_KEY"}, log, false};
    };
    launch.pick_port = [] { return pick_free_port("127.0.0.1"); };
    launch.while_loading = "before it was ready" + (log.empty() ? "" : " (log: " + log + ")");
    serve_ = std::make_unique<EngineProcess>(std::move(launch));
    if (!wait_until_ready({serve_.get()}, o.load_timeout_s + 30, [&](auto d) {
          std::this_thread::sleep_for(d);
          return stop.load();
        }))
      throw Error("interrupted");
  }
  int port() const { return serve_->port(); }

 private:
  std::unique_ptr<EngineProcess> serve_;
};

json timings_of(const json& body, const std::string& what) {
  // A stream can end in an error event instead of the last token's: say what the engine said.
  if (body.is_object() && body.contains("error")) {
    const json& e = body["error"];
    const std::string message = e.is_object() && e.contains("message") && e["message"].is_string()
                                    ? e["message"].get<std::string>()
                                    : e.dump().substr(0, 300);
    throw Error(what + ": the engine answered with an error: " + message);
  }
  if (!body.is_object() || !body.contains("timings") || !body["timings"].is_object())
    throw Error(what + ": the engine's response has no \"timings\" object, so nothing can be measured");
  return body["timings"];
}

double number(const json& timings, const char* key, const std::string& what) {
  if (!timings.contains(key) || !timings[key].is_number())
    throw Error(what + ": the engine's timings have no number \"" + std::string(key) + "\"");
  return timings[key].get<double>();
}

// A non-streamed /completion.
json complete(int port, const json& body, const std::string& what) {
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/completion", body.dump(),
                            {{"Content-Type", "application/json"}}, 600000);
  if (r.status != 200)
    throw Error(what + ": HTTP " + std::to_string(r.status) + " " + (r.error.empty() ? r.body.substr(0, 300) : r.error));
  json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded()) throw Error(what + ": the engine's answer is not JSON");
  return j;
}

// A streamed /completion: the final event's body, the time to the first event, and the text of
// all events.
json complete_streamed(int port, const json& body, const std::string& what, double* ttft_ms, std::string* text) {
  std::string err;
  Fd fd = connect_tcp("127.0.0.1", port, 5000, &err);
  if (!fd.valid()) throw Error(what + ": " + err);
  const std::string payload = body.dump();
  const std::string req = "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Connection: close\r\nContent-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload;
  const auto t0 = Clock::now();
  if (!write_all(fd.get(), req)) throw Error(what + ": the connection broke");
  HttpConn conn(std::move(fd));
  std::string head;
  if (conn.read_head(head, 600000) != ReadStatus::kOk) throw Error(what + ": no response");
  ResponseHead h = parse_response_head(head);
  BodyFraming framing = response_framing(h, "POST");
  ChunkedDecoder chunks;
  std::string data, pending;
  json last;
  bool first = true;
  auto consume = [&](bool at_end) {
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos || (at_end && !pending.empty())) {
      std::string event = end == std::string::npos ? pending : pending.substr(0, end);
      pending.erase(0, end == std::string::npos ? pending.size() : end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      if (first) {
        *ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        first = false;
      }
      json e = json::parse(event.substr(6), nullptr, false);
      if (!e.is_object()) continue;
      if (e.contains("content") && e["content"].is_string()) *text += e["content"].get<std::string>();
      last = e;
    }
  };
  while (true) {
    std::string& buf = conn.buffer();
    if (framing.kind == BodyKind::kChunked) {
      size_t used = chunks.feed(buf.data(), buf.size(), &pending);
      buf.erase(0, used);
      consume(false);
      if (chunks.done()) break;
    } else {
      pending += buf;
      buf.clear();
      consume(false);
    }
    if (!conn.fill(600000)) break;
  }
  consume(true);
  if (h.status != 200) throw Error(what + ": HTTP " + std::to_string(h.status) + " " + pending.substr(0, 300));
  if (first) throw Error(what + ": the stream carried no events");
  return last;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> take_env_assignments(std::vector<std::string>& words) {
  std::vector<std::pair<std::string, std::string>> env;
  size_t n = 0;
  for (; n < words.size(); ++n) {
    const std::string& w = words[n];
    const size_t at = w.find('=');
    const bool name_ok = at != std::string::npos && at > 0 && !std::isdigit(static_cast<unsigned char>(w[0])) &&
                         std::all_of(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(at), [](char ch) {
                           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                         });
    if (!name_ok) break;
    env.push_back({w.substr(0, at), w.substr(at + 1)});
  }
  words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(n));
  return env;
}

json env_object(const std::vector<std::pair<std::string, std::string>>& env) {
  json object = json::object();
  for (const auto& [k, v] : env) object[k] = v;
  return object;
}

BenchConfig parse_bench_config(const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) throw Error("--config \"" + spec + "\": expected NAME=ARGS");
  BenchConfig c;
  c.name = spec.substr(0, eq);
  if (c.name.empty()) throw Error("--config \"" + spec + "\": the name is empty");
  for (char ch : c.name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'))
      throw Error("--config \"" + spec + "\": a name has only letters, digits, '-', '_' and '.'");
  c.args = shell_split(spec.substr(eq + 1));
  c.env = take_env_assignments(c.args);
  // A key would answer bench's own requests with 401: nothing measured.
  auto locks_out = [&](const std::string& what) {
    return Error("--config " + c.name + ": " + what + " would lock bench's requests out; bench runs serve without a key");
  };
  for (const auto& a : c.args) {
    if (a == "-m" || a == "--model" || a == "--port" || a.rfind("--port=", 0) == 0 || a.rfind("--model=", 0) == 0)
      throw Error("--config " + c.name + ": " + a + " is set by bench for every configuration");
    if (a == "--api-key" || a.rfind("--api-key=", 0) == 0) throw locks_out(a);
  }
  for (const auto& kv : c.env)
    if (kv.first == "ONEBIT_API_KEY") throw locks_out(kv.first);
  return c;
}

const std::vector<BenchMetric>& bench_metrics() {
  static const std::vector<BenchMetric> m = {
      {"prompt", "tok/s", true},        {"decode-code", "tok/s", true}, {"decode-prose", "tok/s", true},
      {"decode-short", "tok/s", true},  {"ttft", "ms", false},          {"acceptance", "", true},
      {"tokens-per-step", "", true},    {"step-time", "ms", false},
  };
  return m;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double best_of(const std::vector<double>& v, bool higher) {
  if (v.empty()) return 0;
  return higher ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end());
}

std::vector<double> BenchRecord::values(const std::string& config, const std::string& metric) const {
  std::vector<double> out;
  for (const auto& s : samples)
    if (s.config == config && s.metric == metric) out.push_back(s.value);
  return out;
}

std::vector<BenchRecord::StepCost> BenchRecord::step_costs() const {
  std::vector<StepCost> out;
  const BenchConfig* plain = nullptr;
  for (const auto& c : configs)
    if (!drafted(c.name) && !values(c.name, "decode-code").empty()) {
      plain = &c;
      break;
    }
  if (plain == nullptr) return out;
  std::vector<double> decode;
  for (const char* m : {"decode-code", "decode-prose", "decode-short"})
    for (double v : values(plain->name, m)) decode.push_back(v);
  const double plain_ms = 1000 / median_of(decode);
  for (const auto& c : configs)
    if (auto steps = values(c.name, "step-time"); !steps.empty()) out.push_back({c.name, plain->name, median_of(steps), plain_ms});
  return out;
}

std::vector<BenchRecord::SameAnswers> BenchRecord::same_answers() const {
  std::vector<SameAnswers> out;
  if (configs.empty()) return out;
  const std::string& baseline = configs[0].name;
  std::map<std::pair<int, std::string>, const std::string*> base;  // (round, prompt) -> text
  for (const auto& a : answers)
    if (a.config == baseline) base[{a.round, a.prompt}] = &a.text;
  for (size_t i = 1; i < configs.size(); ++i) {
    SameAnswers s{configs[i].name, baseline};
    for (const auto& a : answers) {
      if (a.config != s.config) continue;
      auto b = base.find({a.round, a.prompt});
      if (b == base.end()) continue;
      ++s.of;
      if (*b->second == a.text) ++s.same;
    }
    if (s.of > 0) out.push_back(s);
  }
  return out;
}

json BenchRecord::to_json() const {
  json cs = json::array();
  for (const auto& c : configs)
    cs.push_back({{"name", c.name}, {"env", env_object(c.env)}, {"args", c.args},
                  {"command", shell_assignments(c.env) + shell_join(c.args)}});
  json ss = json::array();
  for (const auto& s : samples) ss.push_back({{"config", s.config}, {"round", s.round}, {"metric", s.metric}, {"value", s.value}});
  json summary = json::object();
  for (const auto& c : configs)
    for (const auto& m : bench_metrics()) {
      auto v = values(c.name, m.name);
      if (!v.empty()) summary[c.name][m.name] = {{"best", best_of(v, m.higher_is_better)}, {"median", median_of(v)}, {"n", v.size()}};
    }
  for (const auto& sc : step_costs())
    summary[sc.config]["step_cost"] = {{"cost", sc.cost()}, {"step_ms", sc.step_ms}, {"plain", sc.plain}, {"plain_step_ms", sc.plain_ms}};
  for (const auto& sa : same_answers())
    summary[sa.config]["same_answers"] = {{"same", sa.same}, {"of", sa.of}, {"baseline", sa.baseline}};
  json as = json::array();
  for (const auto& a : answers) as.push_back({{"config", a.config}, {"round", a.round}, {"prompt", a.prompt}, {"text", a.text}});
  json prompt = {{"tokens", prompt_tokens}};
  if (!prompt_note.empty()) prompt["note"] = prompt_note;
  return {{"model", model}, {"facts", facts}, {"configs", cs}, {"baseline", configs.empty() ? "" : configs[0].name},
          {"rounds", rounds}, {"samples", ss}, {"answers", as}, {"long_prompt", prompt}, {"summary", summary},
          {"machine", machine}, {"started", started}, {"finished", finished}};
}

std::string utc_timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

json describe_machine() {
  json m;
  const std::string cpu = cpu_model();
  if (!cpu.empty()) m["cpu"] = cpu;
  m["cores"] = std::thread::hardware_concurrency();
  utsname u{};
  if (uname(&u) == 0) m["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  json gpus = json::array();
  for (const auto& row : nvidia_smi("name,memory.total"))
    gpus.push_back(row.size() > 1 ? row[0] + ", " + row[1] + " MiB" : row[0]);
  m["gpus"] = gpus;
  json engine = json::parse(embedded::kEngineManifest, nullptr, false);
  if (engine.is_object()) m["engine"] = engine;
  return m;
}

Bench::Bench(BenchOptions o) : o_(std::move(o)) {
  ModelFacts f = read_model_facts(o_.model);
  facts_ = {{"architecture", f.architecture}, {"moe", f.moe}, {"expert_count", f.expert_count},
            {"file_type", f.file_type ? json(file_type_name(*f.file_type)) : json(nullptr)},
            {"hadamard_q4_0", f.hadamard_q4_0}, {"file_size", f.file_size}};
  long_prompt_ = read_prompt(o_);
}

BenchRecord Bench::new_record() const {
  BenchRecord rec;
  rec.model = o_.model;
  rec.facts = facts_;
  rec.machine = describe_machine();
  rec.started = utc_timestamp();
  return rec;
}

void Bench::fit_prompt(int port, BenchRecord& rec, const BenchProgress& progress) {
  auto count = [&](const std::string& text) {
    HttpResult r = http_fetch("127.0.0.1", port, "POST", "/tokenize", json{{"content", text}, {"add_special", true}}.dump(),
                              {{"Content-Type", "application/json"}}, 600000);
    json j = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
      throw Error("the long prompt: the engine did not count its tokens (HTTP " + std::to_string(r.status) + ")");
    return static_cast<int64_t>(j["tokens"].size());
  };
  HttpResult props = http_fetch("127.0.0.1", port, "GET", "/props", "", {}, 60000);
  json p = json::parse(props.body, nullptr, false);
  int64_t context = 0;
  if (p.is_object() && p.contains("default_generation_settings") && p["default_generation_settings"].is_object())
    context = p["default_generation_settings"].value("n_ctx", int64_t{0});
  int64_t tokens = count(long_prompt_);
  // Room for the 8 generated tokens and a few the engine adds around the prompt.
  const int64_t room = context - 8 - 8;
  if (context > 0 && tokens > room) {
    const int64_t before = tokens;
    if (room < 16) throw Error("the long prompt: the context holds only " + std::to_string(context) + " tokens");
    for (int i = 0; i < 8 && tokens > room; ++i) {
      const size_t chars = static_cast<size_t>(static_cast<double>(long_prompt_.size()) * static_cast<double>(room) /
                                               static_cast<double>(tokens) * 0.98);
      long_prompt_.resize(chars);
      tokens = count(long_prompt_);
    }
    if (tokens > room) throw Error("the long prompt: cannot be cut to the context of " + std::to_string(context) + " tokens");
    rec.prompt_note = "the long prompt was shortened from " + std::to_string(before) + " to " + std::to_string(tokens) +
                      " tokens to fit the engine's context of " + std::to_string(context);
    progress(rec.prompt_note);
  }
  rec.prompt_tokens = static_cast<int>(tokens);
}

void Bench::measure(const BenchConfig& c, int round, const std::string& label, BenchRecord& rec,
                    const BenchProgress& progress, const std::atomic<bool>& stop, double time_limit_s) {
  static const std::pair<const char*, const char*> decode_prompts[] = {
      {"decode-code", kCodePrompt}, {"decode-prose", kProsePrompt}, {"decode-short", kShortPrompt}};
  if (std::none_of(rec.configs.begin(), rec.configs.end(), [&](const BenchConfig& x) { return x.name == c.name; }))
    rec.configs.push_back(c);
  rec.rounds = std::max(rec.rounds, round);
  const auto started = Clock::now();
  auto step = [&](const std::string& what) {
    if (stop) throw Error("interrupted");
    if (time_limit_s > 0 && std::chrono::duration<double>(Clock::now() - started).count() > time_limit_s)
      throw Error("config " + c.name + " took longer than " + std::to_string(static_cast<int>(time_limit_s)) +
                  " s, its limit");
    progress(label + ", " + c.name + ": " + what);
  };
  step("starting serve");
  Server server(o_, c, round, stop);
  auto add = [&](const char* metric, double v) { rec.samples.push_back({c.name, round, metric, v}); };
  step("warm-up");
  complete(server.port(), {{"prompt", kShortPrompt}, {"n_predict", 8}, {"temperature", 0}}, c.name + " warm-up");
  if (!fitted_) {
    fit_prompt(server.port(), rec, progress);
    fitted_ = true;
  }
  for (int i = 0; i < o_.prompt_reps; ++i) {
    step("prompt " + std::to_string(i + 1) + "/" + std::to_string(o_.prompt_reps));
    const std::string what = c.name + " prompt";
    json t = timings_of(complete(server.port(), {{"prompt", long_prompt_}, {"n_predict", 8}, {"temperature", 0},
                                                 {"cache_prompt", false}}, what), what);
    add("prompt", number(t, "prompt_per_second", what));
  }
  double drafted = 0, accepted = 0;
  for (const auto& [metric, prompt] : decode_prompts) {
    for (int i = 0; i < o_.decode_reps; ++i) {
      step(std::string(metric) + " " + std::to_string(i + 1) + "/" + std::to_string(o_.decode_reps));
      const std::string what = c.name + " " + metric;
      double ttft = 0;
      std::string text;
      json t = timings_of(complete_streamed(server.port(),
                                            {{"prompt", prompt}, {"n_predict", o_.decode_tokens}, {"temperature", 0},
                                             {"ignore_eos", true}, {"cache_prompt", false}, {"stream", true}},
                                            what, &ttft, &text),
                          what);
      add(metric, number(t, "predicted_per_second", what));
      add("ttft", ttft);
      if (i == 0) rec.answers.push_back({c.name, round, metric, text});
      if (t.contains("draft_n") && t["draft_n"].is_number() && t["draft_n"].get<double>() > 0) {
        const double n_accepted = t.value("draft_n_accepted", 0.0);
        drafted += t["draft_n"].get<double>();
        accepted += n_accepted;
        // Each verification step yields its accepted drafts and one token of the target's own.
        const double steps = number(t, "predicted_n", what) - n_accepted;
        if (steps > 0) {
          add("tokens-per-step", number(t, "predicted_n", what) / steps);
          add("step-time", number(t, "predicted_ms", what) / steps);
        }
      }
    }
  }
  if (drafted > 0) add("acceptance", accepted / drafted);
}

BenchRecord run_bench(const BenchOptions& o, const BenchProgress& progress, const std::atomic<bool>& stop) {
  Bench bench(o);
  BenchRecord rec = bench.new_record();
  for (int round = 1; round <= o.rounds; ++round)
    for (const BenchConfig& c : o.configs) {
      bench.measure(c, round, "round " + std::to_string(round) + "/" + std::to_string(o.rounds), rec, progress, stop);
    }
  rec.finished = utc_timestamp();
  return rec;
}

}  // namespace onebit

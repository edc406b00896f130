#include "lemonade/server.h"

#include <chrono>
#include <string_view>

#include "base/embedded.h"
#include "lemonade/system_info.h"

namespace onebit {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* const kPrefixes[] = {"/api/v0/", "/api/v1/", "/v0/", "/v1/"};

const Headers kCors = {{"Access-Control-Allow-Origin", "*"}};

json text_error(const std::string& message) { return {{"error", message}}; }

// Collects the last request's statistics from the engine's answer as it is relayed: SSE event
// times for streams, the final `timings` (and `usage`) for both kinds.
class StatsTap {
 public:
  explicit StatsTap(Clock::time_point start) : start_(start) {}
  void feed(const char* data, size_t size) {
    pending_.append(data, size);
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      // An event's data line may follow its "event:" line (the responses API's streams).
      size_t data = event.rfind("data: ", 0) == 0 ? 0 : event.find("\ndata: ");
      if (data == std::string::npos) continue;
      data += data == 0 ? 6 : 7;
      events_.push_back(Clock::now());
      inspect(json::parse(event.substr(data, event.find('\n', data) - data), nullptr, false));
    }
    if (events_.empty() && pending_.size() > (64u << 20)) pending_.clear();  // not a stream: only timings matter
  }
  json finish() {
    if (events_.empty()) inspect(json::parse(pending_, nullptr, false));
    json decode = json::array();
    for (size_t i = 1; i < events_.size(); ++i)
      decode.push_back(std::chrono::duration<double>(events_[i] - events_[i - 1]).count());
    const double measured_ttft = events_.empty() ? 0 : std::chrono::duration<double>(events_.front() - start_).count();
    return {{"time_to_first_token", timings_.contains("prompt_ms") ? timings_["prompt_ms"].get<double>() / 1000.0 : measured_ttft},
            {"tokens_per_second", timings_.value("predicted_per_second", 0.0)},
            {"input_tokens", usage_.value("prompt_tokens", usage_.value("input_tokens", timings_.value("prompt_n", 0)))},
            {"output_tokens",
             usage_.value("completion_tokens", usage_.value("output_tokens", timings_.value("predicted_n", 0)))},
            {"prompt_tokens", timings_.value("prompt_n", 0)},
            {"decode_token_times", decode}};
  }

 private:
  void inspect(const json& j) {
    if (!j.is_object()) return;
    if (j.contains("timings") && j["timings"].is_object()) timings_ = j["timings"];
    if (j.contains("usage") && j["usage"].is_object()) usage_ = j["usage"];
    if (j.contains("response") && j["response"].is_object()) inspect(j["response"]);  // responses API events
  }
  Clock::time_point start_;
  std::string pending_;
  std::vector<Clock::time_point> events_;
  json timings_ = json::object(), usage_ = json::object();
};

ServerConfig config_for(const std::string& api_key, uint64_t max_body, const std::vector<std::string>* allowed_origins) {
  ServerConfig c;
  c.api_key = api_key;
  c.loopback_guard = allowed_origins != nullptr;
  if (allowed_origins) c.allowed_origins = *allowed_origins;
  c.max_body_bytes = max_body;
  // Open without the key: CORS preflights, liveness, and the page (which asks for the key).
  c.is_public = [](const RequestHead& h, const std::string& path) {
    return h.method == "OPTIONS" || path == "/live" || path == "/";
  };
  c.unauthorized_body = text_error("invalid or missing API key (Authorization: Bearer <key>)").dump();
  c.refusal_headers = kCors;
  return c;
}

}  // namespace

LemonadeServer::LemonadeServer(Catalog& catalog, ModelManager& models, const std::string& api_key, uint64_t max_body,
                               const std::vector<std::string>* allowed_origins)
    : catalog_(catalog),
      models_(models),
      ollama_host_(catalog, models),
      ollama_(ollama_host_),
      server_(config_for(api_key, max_body, allowed_origins),
              [this](const Request& req, Responder& r) { return handle(req, r); }) {}

bool LemonadeServer::send_json(Responder& r, int status, const json& body) {
  if (status >= 400) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++errors_;
  }
  return r.send(status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace), kCors);
}

const std::vector<LemonadeServer::Route>& LemonadeServer::routes() {
  static const std::vector<Route> table = {
      {"GET", "live", &LemonadeServer::live},
      {"GET", "health", &LemonadeServer::health},
      {"GET", "models", &LemonadeServer::list_models},
      {"GET", "models/{id}", &LemonadeServer::show_model},
      {"GET", "system-info", &LemonadeServer::machine_info},
      {"GET", "system-stats", &LemonadeServer::machine_stats},
      {"GET", "stats", &LemonadeServer::last_request_stats},
      {"POST", "load", &LemonadeServer::load},
      {"POST", "unload", &LemonadeServer::unload},
      {"POST", "pull", &LemonadeServer::pull},
      {"POST", "delete", &LemonadeServer::remove},
      {"POST", "chat/completions", &LemonadeServer::infer, "/v1/chat/completions"},
      {"POST", "completions", &LemonadeServer::infer, "/v1/completions"},
      {"POST", "responses", &LemonadeServer::infer, "/v1/responses"},
      {"POST", "embeddings", &LemonadeServer::infer, "/v1/embeddings"},
      {"POST", "reranking", &LemonadeServer::infer, "/v1/rerank"},
  };
  return table;
}

bool LemonadeServer::handle(const Request& req, Responder& r) {
  const std::string& m = req.head.method;
  if (m == "OPTIONS")
    return r.send(204, "text/plain", "",
                  {{"Access-Control-Allow-Origin", "*"}, {"Access-Control-Allow-Methods", "GET, POST, HEAD, OPTIONS"},
                   {"Access-Control-Allow-Headers", "Authorization, Content-Type"}, {"Access-Control-Max-Age", "86400"}});
  if (req.path == "/") {
    if (m != "GET" && m != "HEAD") return send_json(r, 405, text_error("/ answers GET"));
    return r.send(200, "text/html; charset=utf-8", m == "HEAD" ? "" : embedded::kLemonadePage);
  }
  if (req.path == "/metrics") return r.send(200, "text/plain; version=0.0.4", metrics());
  if (OllamaRoutes::handles(req.path)) return ollama_.serve(req, r);
  std::string path;
  if (req.path == "/live") path = "live";
  for (const char* p : kPrefixes)
    if (req.path.rfind(p, 0) == 0) path = req.path.substr(std::string(p).size());
  const Route* route = nullptr;
  std::string id;
  for (const Route& candidate : routes()) {
    const std::string_view pattern = candidate.pattern;
    const size_t wild = pattern.find("{id}");
    if (wild == std::string_view::npos ? path == pattern : path.compare(0, wild, pattern.substr(0, wild)) == 0) {
      route = &candidate;
      if (wild != std::string_view::npos) id = path.substr(wild);
      break;
    }
  }
  if (route == nullptr) return send_json(r, 404, text_error("not found: " + req.path));
  const bool get = std::string_view(route->method) == "GET";
  if (get && m == "HEAD") return r.send(200, "application/json", "", kCors);
  if (m != route->method)
    return send_json(r, 405, text_error(req.path + " answers " + route->method + ", not " + m));
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++requests_[route->pattern];
  }
  try {
    Call call{req, *route, id, json::object()};
    if (!get) {
      call.body = json::parse(req.body.empty() ? std::string("{}") : req.body, nullptr, false);
      if (!call.body.is_object()) return send_json(r, 400, text_error("the request body is not a JSON object"));
    }
    return (this->*route->handler)(call, r);
  } catch (const ModelError& e) {
    return send_json(r, e.status, e.to_json());
  } catch (const Error& e) {
    return send_json(r, 400, text_error(e.what()));
  }
}

bool LemonadeServer::live(const Call&, Responder& r) { return send_json(r, 200, {{"status", "ok"}}); }

bool LemonadeServer::health(const Call&, Responder& r) {
  json h = models_.health();
  h["status"] = "ok";
  h["version"] = ONEBIT_VERSION;
  return send_json(r, 200, h);
}

bool LemonadeServer::list_models(const Call& c, Responder& r) {
  const std::string& target = c.req.head.target;
  const bool all = target.find("show_all=true") != std::string::npos || target.find("show_all=1") != std::string::npos;
  json data = json::array();
  for (const auto& e : catalog_.list(all)) data.push_back(Catalog::to_json(e, catalog_.saved_options(e.id)));
  return send_json(r, 200, {{"object", "list"}, {"data", data}});
}

bool LemonadeServer::show_model(const Call& c, Responder& r) {
  auto e = catalog_.find(c.id);
  if (!e) throw ModelError(404, "model_not_found", "model \"" + c.id + "\" is not in the catalog", c.id);
  return send_json(r, 200, Catalog::to_json(*e, catalog_.saved_options(c.id)));
}

bool LemonadeServer::machine_info(const Call&, Responder& r) { return send_json(r, 200, system_info(models_.auto_device())); }

bool LemonadeServer::machine_stats(const Call&, Responder& r) { return send_json(r, 200, system_stats()); }

bool LemonadeServer::last_request_stats(const Call&, Responder& r) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  json s = last_stats_.is_null() ? json{{"time_to_first_token", nullptr}, {"tokens_per_second", nullptr},
                                        {"input_tokens", nullptr}, {"output_tokens", nullptr},
                                        {"decode_token_times", json::array()}, {"prompt_tokens", nullptr}}
                                  : last_stats_;
  return r.send(200, "application/json", s.dump(), kCors);
}

namespace {

// The body's "model_name"; "" when it is absent and not required.
std::string model_name(const json& body, bool required) {
  if (!body.contains("model_name") || body["model_name"].is_null()) {
    if (required) throw Error("model_name is required");
    return std::string();
  }
  if (!body["model_name"].is_string()) throw Error("model_name must be a string");
  return body["model_name"].get<std::string>();
}

}  // namespace

bool LemonadeServer::load(const Call& c, Responder& r) {
  return send_json(r, 200, models_.load(model_name(c.body, true), c.body));
}

bool LemonadeServer::unload(const Call& c, Responder& r) {
  const std::string n = model_name(c.body, false);
  if (n.empty()) {
    models_.unload_all();
    return send_json(r, 200, {{"status", "success"}, {"message", "all models unloaded"}});
  }
  if (!models_.unload(n)) throw ModelError(404, "model_not_found", "model \"" + n + "\" is not loaded", n);
  return send_json(r, 200, {{"status", "success"}, {"message", n + " unloaded"}});
}

bool LemonadeServer::pull(const Call& c, Responder& r) {
  const json& body = c.body;
  const std::string n = model_name(body, true);
  if (body.contains("recipe") && body["recipe"] != "llamacpp")
    throw ModelError(404, "model_not_supported",
                     "recipe " + body["recipe"].dump() + " is not supported: this server runs GGUF models on "
                     "llama.cpp (recipe \"llamacpp\")", n);
  std::vector<std::string> labels;
  for (const char* l : {"reasoning", "vision", "embeddings", "reranking", "coding"})
    if (body.value(l, false)) labels.push_back(l);
  if (body.contains("labels") && body["labels"].is_array())
    for (const auto& l : body["labels"])
      if (l.is_string()) labels.push_back(l);
  const std::string checkpoint = body.contains("checkpoint") && body["checkpoint"].is_string() ? body["checkpoint"].get<std::string>() : "";
  if (checkpoint.empty()) {
    // Pulling a catalog model: fine when it is on disk already, impossible otherwise.
    auto e = catalog_.find(n);
    if (!e) throw ModelError(404, "model_not_found", "model \"" + n + "\" is not in the catalog", n);
    if (e->path.empty())
      throw Error("cannot pull " + n + " (" + e->checkpoint + "): this server does not download models; copy "
                  "its GGUF into a models directory");
    return send_json(r, 200, {{"status", "success"}, {"model_name", n}, {"message", n + " is already on disk"}});
  }
  CatalogEntry e = catalog_.pull(n, checkpoint, labels);
  return send_json(r, 200, {{"status", "success"}, {"model_name", e.id}, {"checkpoint", e.checkpoint}});
}

bool LemonadeServer::remove(const Call& c, Responder& r) {
  const std::string n = model_name(c.body, true);
  auto e = catalog_.find(n);
  if (!e) return send_json(r, 422, text_error("model \"" + n + "\" is unknown"));
  if (!e->user)
    return send_json(r, 422, text_error(n + " is a file in the models directory (" + e->checkpoint +
                                        "), not a pulled model; remove the file to delete it"));
  models_.unload(n);
  catalog_.remove(n);
  return send_json(r, 200, {{"status", "success"}, {"message", n + " deleted"}});
}

bool LemonadeServer::infer(const Call& c, Responder& r) {
  json body = c.body;
  if (!body.contains("model") || !body["model"].is_string()) return send_json(r, 400, text_error("model is required"));
  const std::string model = body["model"];
  if (body.contains("max_completion_tokens") && !body.contains("max_tokens")) {
    body["max_tokens"] = body["max_completion_tokens"];
    body.erase("max_completion_tokens");
  }
  ModelManager::Lease lease = models_.acquire(model);
  Request forwarded = c.req;
  forwarded.head.target = c.route.engine_path;
  StatsTap tap(Clock::now());
  // The stats are in place before the response's last bytes reach the client, so a client that
  // asks for /stats right after sees its own request.
  auto record = [&](const char* d, size_t n) {
    if (d != nullptr) return tap.feed(d, n);
    json stats = tap.finish();
    std::lock_guard<std::mutex> lock(stats_mu_);
    last_stats_ = stats;
    prompt_tokens_ += stats["input_tokens"].get<uint64_t>();
    generated_tokens_ += stats["output_tokens"].get<uint64_t>();
  };
  return r.forward(lease.engine(), forwarded, body.dump(-1, ' ', false, json::error_handler_t::replace), kCors, record);
}

std::string LemonadeServer::metrics() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  std::string m = "# HELP onebit_lemonade_requests_total API requests by route.\n# TYPE onebit_lemonade_requests_total counter\n";
  for (const auto& [route, n] : requests_) m += "onebit_lemonade_requests_total{route=\"" + route + "\"} " + std::to_string(n) + "\n";
  m += "# HELP onebit_lemonade_errors_total Requests answered with an error.\n# TYPE onebit_lemonade_errors_total counter\n";
  m += "onebit_lemonade_errors_total " + std::to_string(errors_) + "\n";
  m += "# HELP onebit_lemonade_prompt_tokens_total Prompt tokens of completed requests.\n# TYPE onebit_lemonade_prompt_tokens_total counter\n";
  m += "onebit_lemonade_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  m += "# HELP onebit_lemonade_generated_tokens_total Generated tokens of completed requests.\n# TYPE onebit_lemonade_generated_tokens_total counter\n";
  m += "onebit_lemonade_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  m += "# HELP onebit_lemonade_loaded_models Models loaded now.\n# TYPE onebit_lemonade_loaded_models gauge\n";
  m += "onebit_lemonade_loaded_models " + std::to_string(models_.loaded_names().size()) + "\n";
  return m;
}

}  // namespace onebit

#include "ollama/ollama_routes.h"

#include <chrono>

#include "http/conn.h"

namespace onebit {
namespace {

using nlohmann::json;

const char kJson[] = "application/json; charset=utf-8";

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/api/version", "GET"},   {"/api/tags", "GET"},        {"/api/ps", "GET"},    {"/api/show", "POST"},
    {"/api/chat", "POST"},     {"/api/generate", "POST"},   {"/api/embed", "POST"}, {"/api/embeddings", "POST"},
    {"/api/pull", "POST"},     {"/api/delete", "DELETE"},
};

bool send_json(Responder& r, int status, const json& body) {
  return r.send(status, kJson, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

EngineMeta fetch_engine_meta(const Upstream& engine) {
  HttpResult res = http_fetch("127.0.0.1", engine.port, "GET", "/v1/models", "", {engine.authorization()}, 5000);
  if (res.status != 200) return {};
  return engine_meta(json::parse(res.body, nullptr, false));
}

bool OllamaRoutes::handles(const std::string& path) {
  for (const Route& route : kRoutes)
    if (path == route.path) return true;
  return false;
}

bool OllamaRoutes::serve(const Request& req, Responder& r) {
  try {
    return dispatch(req, r);
  } catch (const OllamaError& e) {
    return r.send(e.status, kJson, ollama_error_body(e.what()));
  } catch (const Error& e) {
    return r.send(500, kJson, ollama_error_body(e.what()));
  }
}

bool OllamaRoutes::dispatch(const Request& req, Responder& r) {
  const std::string& m = req.head.method;
  for (const Route& route : kRoutes) {
    if (req.path != route.path) continue;
    const bool get = std::string_view(route.method) == "GET";
    if (m != route.method && !(get && m == "HEAD"))
      throw OllamaError(405, req.path + " answers " + route.method + ", not " + m);
    if (get && m == "HEAD") return r.send(200, kJson, "");
    break;
  }
  const std::string& p = req.path;
  if (p == "/api/version") return send_json(r, 200, {{"version", ONEBIT_VERSION}});
  if (p == "/api/tags") {
    json models = json::array();
    for (const OllamaModel& model : host_.models()) models.push_back(ollama_tag(model));
    return send_json(r, 200, {{"models", models}});
  }
  if (p == "/api/ps") return ps(r);
  if (p == "/api/show") return show(req, r);
  if (p == "/api/pull") return pull(req, r);
  if (p == "/api/delete") return remove(req, r);
  const json body = parse_ollama_request(req.body);
  if (p == "/api/chat") return generate(req, r, chat_call(body), ReplyKind::kChat);
  if (p == "/api/generate") return generate(req, r, generate_call(body), ReplyKind::kGenerate);
  if (p == "/api/embed") return generate(req, r, embed_call(body, false), ReplyKind::kEmbed);
  return generate(req, r, embed_call(body, true), ReplyKind::kEmbeddings);
}

bool OllamaRoutes::generate(const Request& req, Responder& r, const EngineCall& call, ReplyKind kind) {
  const auto start = std::chrono::steady_clock::now();
  // Nothing to generate: Ollama's way to load a model, or with keep_alive 0 to unload it.
  if (call.empty && call.keep_alive.unload_now()) {
    if (!host_.find(call.model)) throw OllamaError(404, "model \"" + call.model + "\" not found");
    host_.unload(call.model);
    return send_json(r, 200, ollama_load_reply(call.model, kind, "unload"));
  }
  bool keep;
  {
    OllamaLease lease = host_.use(call.model);
    if (call.keep_alive.given) host_.keep_alive(call.model, call.keep_alive);
    if (call.empty) {
      keep = kind == ReplyKind::kEmbeddings ? send_json(r, 200, {{"embedding", json::array()}})
             : kind == ReplyKind::kEmbed    ? send_json(r, 200, {{"model", call.model}, {"embeddings", json::array()}})
                                            : send_json(r, 200, ollama_load_reply(call.model, kind, "load"));
    } else {
      Request engine_req;
      engine_req.head = req.head;
      engine_req.head.method = "POST";
      engine_req.head.target = call.path;
      engine_req.path = call.path;
      OllamaReply reply(kind, call.model, call.stream, start, lease.load_ns);
      keep = r.translate(lease.engine, engine_req, call.body.dump(-1, ' ', false, json::error_handler_t::replace), reply);
    }
  }
  // After the lease is let go: unloading waits for the model to be idle.
  if (call.keep_alive.unload_now()) host_.unload(call.model);
  return keep;
}

bool OllamaRoutes::show(const Request& req, Responder& r) {
  const std::string name = requested_model(parse_ollama_request(req.body));
  const std::optional<OllamaModel> model = host_.find(name);
  if (!model) throw OllamaError(404, "model \"" + name + "\" not found");
  for (const OllamaRunning& running : host_.running())
    if (running.model.name == model->name) return send_json(r, 200, ollama_show(*model, &running.meta));
  return send_json(r, 200, ollama_show(*model, nullptr));
}

bool OllamaRoutes::ps(Responder& r) {
  json models = json::array();
  for (const OllamaRunning& running : host_.running()) models.push_back(ollama_ps_entry(running));
  return send_json(r, 200, {{"models", models}});
}

bool OllamaRoutes::pull(const Request& req, Responder& r) {
  const json body = parse_ollama_request(req.body);
  const std::string name = requested_model(body);
  const bool stream = body.contains("stream") && body["stream"].is_boolean() ? body["stream"].get<bool>() : true;
  host_.pull(name);
  if (!stream) return send_json(r, 200, {{"status", "success"}});
  return r.send(200, "application/x-ndjson", json{{"status", "success"}}.dump() + "\n");
}

bool OllamaRoutes::remove(const Request& req, Responder& r) {
  host_.remove(requested_model(parse_ollama_request(req.body)));
  return r.send(200, kJson, "");
}

}  // namespace onebit

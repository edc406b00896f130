// Routing for `1bit serve --long-model R --long-from N`: the first request of each conversation
// is measured in tokens by the main engine (its /apply-template, then /tokenize), and the whole
// conversation goes to the long backend when that count reaches N. Later requests of the same
// conversation follow its first route, so each engine keeps its cached prefix.
//
// A conversation is named by its opening: every message up to and including the first user
// message. Requests other than chat and text completions go to the main backend unrouted.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "serve/proxy.h"

namespace onebit {

class LongRouter {
 public:
  static constexpr size_t kMain = 0;
  static constexpr size_t kLong = 1;

  LongRouter(Upstream main_engine, int64_t long_from, size_t max_conversations = 100000)
      : main_(std::move(main_engine)), long_from_(long_from), max_conversations_(max_conversations) {}

  RouteDecision route(const RequestHead& req, const std::string& body);
  // The main engine moved (restarted on another port); only before requests are routed.
  void set_main(Upstream main_engine) { main_ = std::move(main_engine); }

 private:
  struct Route {
    size_t backend;
    int64_t tokens;
  };
  // Token count of a request's prompt through the main engine; -1 with `error` set on failure.
  int64_t count_tokens(bool chat, const std::string& payload, std::string& error) const;
  RouteDecision decide(const Route& r) const;
  Headers headers() const;  // for requests to the main engine

  Upstream main_;  // the main engine, which counts tokens
  int64_t long_from_;
  size_t max_conversations_;
  std::mutex mu_;
  std::list<uint64_t> order_;  // conversation keys, least recently used first
  std::unordered_map<uint64_t, std::pair<Route, std::list<uint64_t>::iterator>> routes_;
};

}  // namespace onebit

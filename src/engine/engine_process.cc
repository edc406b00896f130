#include "engine/engine_process.h"

#include "base/error.h"
#include "engine/port_owner.h"

namespace onebit {

constexpr auto kPollInterval = std::chrono::milliseconds(250);

EngineProcess::EngineProcess(EngineLaunch launch) : launch_(std::move(launch)) { start_on(launch_.pick_port()); }

EngineProcess::~EngineProcess() {
  if (child_) child_->stop();
}

void EngineProcess::start_on(int port) {
  port_ = port;
  ++attempts_;
  const ChildSpec spec = launch_.command(port);
  child_ = launch_.spawn ? launch_.spawn(spec) : ChildProcess::start(spec);
}

EngineProcess::State EngineProcess::poll() {
  if (state_ == State::kLoading) {
    if (!child_->running()) {
      // A child that could not bind its port exits at once, and someone else listens there.
      if (!port_has_listener(port_)) {
        failure_ = exit_report(launch_.while_loading);
        leave_loading(State::kFailed);
      } else if (attempts_ >= kPortAttempts) {
        failure_ = launch_.name + " could not listen: other programs took " + std::to_string(kPortAttempts) +
                   " of its ports in a row before it could";
        leave_loading(State::kFailed);
      } else {
        const int taken = port_;
        const int port = launch_.pick_port();
        if (launch_.on_new_port) launch_.on_new_port(taken, port);
        child_->stop();
        start_on(port);
      }
    } else if (child_ready_on(child_->pid(), port_)) {
      leave_loading(State::kReady);
    }
  } else if (state_ == State::kReady && !child_->running()) {
    state_ = State::kExited;
  }
  return state_;
}

void EngineProcess::leave_loading(State next) {
  state_ = next;
  launch_.command = nullptr;
  launch_.pick_port = nullptr;
  launch_.on_new_port = nullptr;
  launch_.spawn = nullptr;
}

std::string indented_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  | " + l;
  return out;
}

std::string EngineProcess::exit_report(const std::string& when) {
  return launch_.name + " exited with code " + std::to_string(child_->exit_code().value_or(-1)) + " " + when +
         "; its last lines:" + indented_lines(child_->last_lines(kReportLines));
}

void EngineProcess::stop(std::chrono::milliseconds grace) {
  child_->stop(grace);
  leave_loading(State::kStopped);
}

bool wait_until_ready(const std::vector<EngineProcess*>& engines, double timeout_s,
                      const std::function<bool(std::chrono::milliseconds)>& pause) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    bool all = true;
    for (EngineProcess* e : engines) {
      if (e->poll() == EngineProcess::State::kFailed) throw Error(e->failure());
      all = all && e->state() == EngineProcess::State::kReady;
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      for (EngineProcess* e : engines)
        if (e->state() != EngineProcess::State::kReady)
          throw Error(e->name() + " did not load within " + std::to_string(static_cast<int>(timeout_s)) +
                      " s (--load-timeout); its last lines:" + indented_lines(e->last_lines()));
    }
    if (pause(kPollInterval)) return false;
  }
}

}  // namespace onebit

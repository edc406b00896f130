#include "rpc/rpc_worker_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "base/cli.h"
#include "base/error.h"
#include "base/paths.h"
#include "base/process_setup.h"
#include "bench/machine.h"
#include "engine/child_process.h"
#include "engine/device.h"
#include "engine/engine_process.h"
#include "http/loopback_guard.h"
#include "http/net.h"
#include "rpc/rpc_endpoints.h"

namespace onebit {
namespace {

// The protocol lets any client that reaches the port allocate memory on the worker and run
// graphs there, with no key: loopback unless the user says the network is trusted.
constexpr const char* kNoAuth =
    "the RPC protocol has no authentication: whoever reaches the port can use this machine's memory and compute";

struct WorkerOptions {
  std::string host = "127.0.0.1";
  int port = 50052;
  std::string device = "auto";
  int64_t threads = 0;  // 0: the physical cores
  std::string cache_dir;
  bool allow_remote = false;
  bool help = false;
};

std::vector<CliOption> worker_option_table(WorkerOptions& o) {
  return {
      {{"--host"}, "HOST", "address to listen on (default: 127.0.0.1; another one needs --allow-remote)",
       [&o](const std::string& v) { o.host = v; }},
      {{"--port"}, "PORT", "port to listen on (default: 50052; 0 picks a free one)",
       [&o](const std::string& v) { o.port = static_cast<int>(parse_int_option("--port", v, 0, 65535)); }},
      {{"--device"}, "DEV", "auto, cpu, cuda or vulkan: what the worker offers (default: auto = every CUDA\n"
                            "device, else every Vulkan GPU, else the CPU)",
       [&o](const std::string& v) {
         if (v != "auto" && v != "cpu" && v != "cuda" && v != "vulkan")
           throw Error("--device: \"" + v + "\" is not one of auto, cpu, cuda, vulkan");
         o.device = v;
       }},
      {{"-t", "--threads"}, "N", "CPU threads for the CPU device (default: the physical cores)",
       [&o](const std::string& v) { o.threads = parse_int_option("--threads", v, 1, 4096); }},
      {{"--cache"}, "DIR", "keep the tensors engines send in DIR, so a model's second load reads them\n"
                           "from there instead of the network",
       [&o](const std::string& v) { o.cache_dir = v; }},
      {{"--allow-remote"}, "", "listen on a non-loopback --host, on a network you trust only: the RPC\n"
                               "protocol has no authentication",
       [&o](const std::string&) { o.allow_remote = true; }},
  };
}

std::string usage() {
  WorkerOptions o;
  return "usage: 1bit rpc-worker [options]\n\n"
         "Offers this machine's CPU or GPUs to an engine on another machine (or this one) through\n"
         "the engine's RPC backend: run it there, then 1bit serve --rpc HOST:PORT[,HOST:PORT...]\n"
         "here, and the engine places layers on the workers as on local GPUs. A worker serves one\n"
         "engine at a time. It listens on loopback unless --allow-remote is given, because the RPC\n"
         "protocol has no authentication: whoever reaches the port can use this machine's memory\n"
         "and compute.\n\noptions:\n" + format_options(worker_option_table(o));
}

// The devices of `kind` for the engine's -d: what auto would choose, by the same order as serve.
std::string device_list(const std::string& requested) {
  if (requested == "cpu") return "CPU";
  const DeviceChoice where = resolve_device(requested, default_llama_server());
  if (where.device == "cpu") return "CPU";
  std::string list;
  for (const auto& name : device_names(where.devices, where.device, requested == "auto"))
    list += (list.empty() ? "" : ",") + name;
  return list;
}

// "CPU: AMD EPYC (24105 MiB, 24105 MiB free)", ...: the devices the server printed it offers.
std::vector<std::string> offered(ChildProcess& child) {
  std::vector<std::string> devices;
  bool listing = false;
  const std::vector<std::string> lines = child.last_lines(200);
  if (std::find(lines.begin(), lines.end(), "Accepted client connection") == lines.end()) return devices;
  for (const auto& line : lines) {
    if (line == "Devices:") {
      listing = true;
    } else if (listing && line.rfind("  ", 0) == 0 && line.find(": ") != std::string::npos &&
               line.find("transport") == std::string::npos) {
      devices.push_back(line.substr(2));
    } else if (listing) {
      listing = line.rfind("  ", 0) == 0;
    }
  }
  return devices;
}

std::string exit_report(ChildProcess& child, const std::string& when) {
  return "the engine's RPC server exited with code " + std::to_string(child.exit_code().value_or(-1)) + " " + when +
         "; its last lines:" + indented_lines(child.last_lines(kReportLines));
}

int serve_worker(const WorkerOptions& o) {
  if (!o.allow_remote && !is_loopback_address(o.host))
    throw Error("--host " + o.host + " is not a loopback address, and " + kNoAuth +
                "; add --allow-remote to listen there anyway, on a network you trust");
  const std::string program = executable_dir() + "/ggml-rpc-server";
  if (access(program.c_str(), X_OK) != 0) throw Error(program + ": no runnable ggml-rpc-server here (run make build)");
  const std::string devices = device_list(o.device);
  int port = o.port;
  {
    // The engine's server reports a taken port only on its output and then exits 0: bind here
    // first, so that the error names the address.
    Fd probe = listen_tcp(o.host, port);
    port = bound_port(probe.get());
  }
  const unsigned threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : physical_cores();
  ChildSpec spec{program, {"-H", o.host, "-p", std::to_string(port), "-d", devices, "-t", std::to_string(threads)}, {}, {}, "", false};
  if (!o.cache_dir.empty()) {
    // The engine keeps its cache in $LLAMA_CACHE/rpc/.
    spec.args.push_back("-c");
    spec.env_added.push_back({"LLAMA_CACHE", o.cache_dir});
  }
  const sigset_t signals = block_stop_signals();
  auto child = ChildProcess::start(spec);
  // Listening once a connection is accepted; the probe's connection closes at once, which the
  // server takes as a client that left.
  const std::string reach = o.host == "0.0.0.0" ? "127.0.0.1" : o.host == "::" ? "::1" : o.host;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!connect_tcp(reach, port, 200).valid()) {
    timespec pause{0, 50'000'000};
    if (sigtimedwait(&signals, nullptr, &pause) > 0) {
      child->stop();
      return 0;
    }
    if (!child->running()) throw Error(exit_report(*child, "before it listened"));
    if (std::chrono::steady_clock::now() > deadline) {
      child->stop();
      throw Error("the engine's RPC server did not listen on " + o.host + ":" + std::to_string(port) + " within 120 s");
    }
  }
  // Its list of devices reaches the pipe when it flushes on accepting the probe.
  std::vector<std::string> devices_offered;
  for (int i = 0; i < 40 && devices_offered.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    devices_offered = offered(*child);
  }
  std::string what;
  for (const auto& d : devices_offered) what += (what.empty() ? "" : ", ") + d;
  const RpcEndpoint self{o.host, port};
  print_line("1bit rpc-worker: offering " + (what.empty() ? devices : what));
  print_line("1bit rpc-worker: listening on " + self.text() + " (use it with 1bit serve --rpc " + self.text() + "); " +
             kNoAuth + (o.allow_remote ? " (--allow-remote)" : ", so it listens on loopback only"));
  while (true) {
    timespec tick{0, 250'000'000};
    if (sigtimedwait(&signals, nullptr, &tick) > 0) break;
    if (!child->running()) throw Error(exit_report(*child, "while serving"));
  }
  std::cerr << "1bit rpc-worker: stopping\n";
  child->stop();
  return 0;
}

}  // namespace

int run_rpc_worker(const std::vector<std::string>& args) {
  try {
    WorkerOptions o;
    CliParse p = parse_cli(worker_option_table(o), args);
    if (p.help) {
      std::cout << usage();
      return 0;
    }
    if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
    if (!p.after_dashes.empty()) throw Error("rpc-worker passes nothing to the engine after \"--\"");
    return serve_worker(o);
  } catch (const Error& e) {
    std::cerr << "1bit rpc-worker: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit

// A GPU timeline of any CUDA program, for finding where a decode step's time goes: every kernel
// (those inside CUDA graphs too), memory copy and CUDA runtime call with its start and end on
// CUPTI's clock, written as CSV while the program runs. No source change to the program: it is
// preloaded.
//
//   g++ -O2 -shared -fPIC -o libtimeline.so timeline.cc -I$CUDA/include -L$CUPTI_LIB -lcupti
//   ONEBIT_TIMELINE_OUT=t.csv LD_PRELOAD=$PWD/libtimeline.so llama-bench ...
//
// Rows: kind,name,start_ns,end_ns,correlation,graph_id,extra, where kind is kernel, memcpy, memset
// or api; extra is the grid size of a kernel, the bytes of a copy and the thread of an API call.
// A kernel launched by a graph carries the correlation of the cudaGraphLaunch that ran it.
// summary.py reads the file.

#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

FILE *     g_out = nullptr;
std::mutex g_out_mutex;

void die_on(CUptiResult r, const char * what) {
  if (r != CUPTI_SUCCESS) {
    const char * msg = nullptr;
    cuptiGetResultString(r, &msg);
    std::fprintf(stderr, "timeline: %s: %s\n", what, msg ? msg : "unknown CUPTI error");
    std::exit(1);
  }
}

// The kernel's name without its parameter list: "void mul_mat_vec_q<2, 1, 0, 0, 0>".
std::string kernel_name(const char * mangled) {
  if (mangled == nullptr) return "?";
  int    status = 0;
  char * plain  = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain ? plain : mangled;
  std::free(plain);
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0) {
      name.resize(i);
      break;
    }
  }
  for (char & c : name) {
    if (c == ',') c = ';';  // the file is CSV
  }
  return name;
}

void CUPTIAPI buffer_requested(uint8_t ** buffer, size_t * size, size_t * max_records) {
  *buffer      = static_cast<uint8_t *>(std::aligned_alloc(8, kBufferBytes));
  *size        = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t * buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_out_mutex);
  CUpti_Activity * record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto * k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
        std::fprintf(g_out, "kernel,%s,%llu,%llu,%u,%u,%dx%dx%d\n", kernel_name(k->name).c_str(),
                     (unsigned long long) k->start, (unsigned long long) k->end, k->correlationId, k->graphId,
                     k->gridX, k->gridY, k->gridZ);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto * m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
        std::fprintf(g_out, "memcpy,kind%u,%llu,%llu,%u,%u,%llu\n", (unsigned) m->copyKind,
                     (unsigned long long) m->start, (unsigned long long) m->end, m->correlationId, m->graphId,
                     (unsigned long long) m->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto * m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
        std::fprintf(g_out, "memset,memset,%llu,%llu,%u,%u,%llu\n", (unsigned long long) m->start,
                     (unsigned long long) m->end, m->correlationId, m->graphId, (unsigned long long) m->bytes);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto * a    = reinterpret_cast<const CUpti_ActivityAPI *>(record);
        const char * name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
        std::fprintf(g_out, "api,%s,%llu,%llu,%u,0,%u\n", name ? name : "?", (unsigned long long) a->start,
                     (unsigned long long) a->end, a->correlationId, a->threadId);
        break;
      }
      default:
        break;
    }
  }
  std::fflush(g_out);
  std::free(buffer);
}

struct Tracer {
  Tracer() {
    const char * path = std::getenv("ONEBIT_TIMELINE_OUT");
    g_out = std::fopen(path && *path ? path : "timeline.csv", "w");
    if (g_out == nullptr) {
      std::fprintf(stderr, "timeline: cannot write %s\n", path && *path ? path : "timeline.csv");
      std::exit(1);
    }
    std::fprintf(g_out, "kind,name,start_ns,end_ns,correlation,graph_id,extra\n");
    die_on(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks");
    die_on(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
    die_on(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable copies");
    die_on(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memsets");
    die_on(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enable runtime calls");
    // a server is stopped by a signal: what it did until then is in the file within a second
    die_on(cuptiActivityFlushPeriod(500), "flush period");
  }
  ~Tracer() {
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> lock(g_out_mutex);
    std::fclose(g_out);
  }
};

// A program that ends through exit() or by returning from main flushes the rest here.
Tracer g_tracer;

}  // namespace

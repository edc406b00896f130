#include "model/rotate.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "ggml.h"
#include "gguf.h"
#include "model/gguf_facts.h"

namespace onebit {
namespace {

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlDeleter {
  void operator()(ggml_context* c) const { ggml_free(c); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;
using GgmlPtr = std::unique_ptr<ggml_context, GgmlDeleter>;

constexpr int kBlock = 32;
constexpr uint32_t kFileTypeQ4_0 = 2;  // LLAMA_FTYPE_MOSTLY_Q4_0

bool rotatable_source(ggml_type t) {
  return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q8_0;
}

// The whole tensor as floats, read from its place in the file.
std::vector<float> read_as_floats(FILE* f, uint64_t offset, const ggml_tensor* t, const std::string& path) {
  const size_t bytes = ggml_nbytes(t);
  std::vector<uint8_t> raw(bytes);
  if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0 || std::fread(raw.data(), 1, bytes, f) != bytes)
    throw Error(path + ": truncated: tensor " + ggml_get_name(t) + " ends past the end of the file");
  std::vector<float> out(static_cast<size_t>(ggml_nelements(t)));
  if (t->type == GGML_TYPE_F32) std::memcpy(out.data(), raw.data(), bytes);
  else ggml_get_type_traits(t->type)->to_float(raw.data(), out.data(), ggml_nelements(t));
  return out;
}

// Runs fn(r0, r1) over rows [0, rows) split among `threads`.
void parallel_rows(int64_t rows, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t per = (rows + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    const int64_t r0 = per * i, r1 = std::min(rows, r0 + per);
    if (r0 >= r1) break;
    pool.emplace_back(fn, r0, r1);
  }
  for (auto& t : pool) t.join();
}

// Rotates every 32-block of every row (rows of `n` floats) and quantizes the rows to Q4_0, the
// rows split among `threads`. `importance`, when not empty, holds `n` floats for each of the
// tensor's matrices (its experts, or the one matrix), each for that matrix's rows. A rotated
// block's inputs are mixed by H, so each of them carries the mean importance of the block: for
// inputs whose cross terms are unknown (the importance matrix holds only E[x_i^2]),
// E[(Hx)_i^2] = sum_j H_ij^2 E[x_j^2] = the block's mean.
std::vector<uint8_t> rotate_and_quantize(std::vector<float>& w, int64_t n, bool rotate, std::vector<float> importance,
                                         int threads) {
  const int64_t rows = static_cast<int64_t>(w.size()) / n;
  std::vector<uint8_t> q(static_cast<size_t>(rows) * ggml_row_size(GGML_TYPE_Q4_0, n));
  if (rotate)
    parallel_rows(rows, threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = 0; b < n; b += kBlock) hadamard32(w.data() + r * n + b);
    });
  const int64_t matrices = importance.empty() ? 1 : static_cast<int64_t>(importance.size()) / n;
  const int64_t rows_each = rows / matrices;
  if (rotate)
    for (size_t b = 0; b < importance.size(); b += kBlock) {
      float mean = 0;
      for (int i = 0; i < kBlock; ++i) mean += importance[b + i] / kBlock;
      std::fill(importance.begin() + static_cast<std::ptrdiff_t>(b), importance.begin() + static_cast<std::ptrdiff_t>(b + kBlock), mean);
    }
  for (int64_t m = 0; m < matrices; ++m) {
    const float* imp = importance.empty() ? nullptr : importance.data() + m * n;
    parallel_rows(rows_each, threads, [&](int64_t r0, int64_t r1) {
      ggml_quantize_chunk(GGML_TYPE_Q4_0, w.data(), q.data(), (m * rows_each + r0) * n, r1 - r0, n, imp);
    });
  }
  return q;
}

// Removes the partial output unless released.
struct PartFile {
  std::string path;
  bool keep = false;
  ~PartFile() {
    if (!keep) std::remove(path.c_str());
  }
};

}  // namespace

Importance load_importance(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such importance matrix file");
  char magic[4] = {};
  if (std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
      !f || std::fread(magic, 1, 4, f.get()) != 4 || std::memcmp(magic, "GGUF", 4) != 0)
    throw Error(path + ": not a GGUF importance matrix (llama-imatrix writes one with -o FILE.gguf)");
  ggml_context* data_raw = nullptr;
  ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr);  // the line below says what is wrong
  GgufPtr g(gguf_init_from_file(path.c_str(), {/*no_alloc=*/false, &data_raw}));
  ggml_log_set(nullptr, nullptr);
  if (!g) throw Error(path + ": not a readable GGUF importance matrix (cut short?)");
  GgmlPtr data(data_raw);
  Importance imp;
  const std::string sums = ".in_sum2";
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    const std::string name = gguf_get_tensor_name(g.get(), i);
    if (name.size() <= sums.size() || name.compare(name.size() - sums.size(), sums.size(), sums) != 0) continue;
    const std::string weight = name.substr(0, name.size() - sums.size());
    const ggml_tensor* s = ggml_get_tensor(data.get(), name.c_str());
    const ggml_tensor* c = ggml_get_tensor(data.get(), (weight + ".counts").c_str());
    if (c == nullptr) throw Error(path + ": " + name + " has no " + weight + ".counts beside it");
    if (s->type != GGML_TYPE_F32 || c->type != GGML_TYPE_F32)
      throw Error(path + ": " + weight + "'s importance data is not F32");
    const int64_t matrices = ggml_nelements(c);
    if (matrices == 0 || ggml_nelements(s) % matrices != 0)
      throw Error(path + ": " + weight + " has " + std::to_string(ggml_nelements(s)) + " sums for " +
                  std::to_string(matrices) + " counts");
    const int64_t n = ggml_nelements(s) / matrices;
    const float* sp = static_cast<const float*>(s->data);
    const float* cp = static_cast<const float*>(c->data);
    std::vector<float>& e = imp.weights[weight];
    e.resize(static_cast<size_t>(ggml_nelements(s)));
    // The mean of x_i^2 over the tokens each matrix saw; a matrix no token reached weighs all alike.
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t j = 0; j < n; ++j) e[m * n + j] = cp[m] > 0 ? sp[m * n + j] / cp[m] : 1.0f;
  }
  if (imp.weights.empty()) throw Error(path + ": holds no importance data (no *.in_sum2 tensors)");
  return imp;
}

bool is_rotated_weight(const std::string& name) {
  static const std::regex pattern(
      R"(blk\.[0-9]+\.(attn_(q|k|v|qkv|gate|output)|ffn_(gate|up|down)(_exps|_shexp)?|ssm_(in|out|alpha|beta))\.weight)");
  return std::regex_match(name, pattern);
}

void hadamard32(float* x) {
  for (int len = 1; len < kBlock; len <<= 1)
    for (int i = 0; i < kBlock; i += len << 1)
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kBlock));
  for (int i = 0; i < kBlock; ++i) x[i] *= scale;
}

RotateSummary rotate_model(const std::string& in, const std::string& out, const RotateOptions& options,
                           const std::function<void(const RotateProgress&)>& progress) {
  const ModelFacts facts = read_model_facts(in);  // a clear error for anything that is not a GGUF
  if (facts.hadamard_q4_0) throw Error(in + ": is already rotated (onebit.hadamard_q4_0 = 32)");
  if (std::filesystem::exists(out) && std::filesystem::equivalent(in, out))
    throw Error(out + ": is the source; write the rotated file elsewhere");

  ggml_context* meta_raw = nullptr;
  GgufPtr src(gguf_init_from_file(in.c_str(), {/*no_alloc=*/true, &meta_raw}));
  if (!src) throw Error(in + ": not a valid GGUF file");
  GgmlPtr meta(meta_raw);
  const int64_t n = gguf_get_n_tensors(src.get());

  // Decide every tensor's fate before anything is written.
  std::vector<bool> rotate(static_cast<size_t>(n));
  int64_t rotated = 0;
  for (int64_t i = 0; i < n; ++i) {
    const char* name = gguf_get_tensor_name(src.get(), i);
    const ggml_tensor* t = ggml_get_tensor(meta.get(), name);
    if (!is_rotated_weight(name)) continue;
    if (!rotatable_source(t->type))
      throw Error(in + ": tensor " + name + " is " + ggml_type_name(t->type) +
                  "; rotating weights already rounded to few bits adds their error: rotate from an F32, F16, BF16 or "
                  "Q8_0 file");
    if (t->ne[0] % kBlock != 0)
      throw Error(in + ": tensor " + name + " has an input dimension of " + std::to_string(t->ne[0]) +
                  ", not a multiple of 32");
    if (options.importance != nullptr) {
      const auto e = options.importance->weights.find(name);
      const int64_t want = t->ne[0] * t->ne[2];  // one row of importance per expert
      if (e != options.importance->weights.end() && static_cast<int64_t>(e->second.size()) != want)
        throw Error(in + ": the importance matrix has " + std::to_string(e->second.size()) + " values for " + name +
                    ", which needs " + std::to_string(want) + ": it was made for another model");
    }
    rotate[static_cast<size_t>(i)] = true;
    ++rotated;
  }
  if (rotated == 0) throw Error(in + ": holds no weight that multiplies activations (blk.N.attn_*, ffn_*, ssm_*)");

  GgufPtr dst(gguf_init_empty());
  gguf_set_kv(dst.get(), src.get());
  gguf_set_val_u32(dst.get(), "general.file_type", kFileTypeQ4_0);
  gguf_set_val_u32(dst.get(), "general.quantization_version", GGML_QNT_VERSION);
  if (!options.plain) gguf_set_val_u32(dst.get(), "onebit.hadamard_q4_0", kBlock);
  GgmlPtr out_meta(ggml_init({ggml_tensor_overhead() * static_cast<size_t>(n + 1), nullptr, /*no_alloc=*/true}));
  for (int64_t i = 0; i < n; ++i) {
    const ggml_tensor* t = ggml_get_tensor(meta.get(), gguf_get_tensor_name(src.get(), i));
    ggml_tensor* o = ggml_new_tensor(out_meta.get(), rotate[static_cast<size_t>(i)] ? GGML_TYPE_Q4_0 : t->type,
                                     ggml_n_dims(t), t->ne);
    ggml_set_name(o, ggml_get_name(t));
    gguf_add_tensor(dst.get(), o);
  }

  std::unique_ptr<FILE, int (*)(FILE*)> in_file(std::fopen(in.c_str(), "rb"), std::fclose);
  if (!in_file) throw Error(in + ": " + std::strerror(errno));
  PartFile part{out + ".part"};
  std::unique_ptr<FILE, int (*)(FILE*)> out_file(std::fopen(part.path.c_str(), "wb"), std::fclose);
  if (!out_file) throw Error(part.path + ": cannot write: " + std::strerror(errno));
  if (!gguf_write_to_file_ptr(dst.get(), out_file.get(), /*only_meta=*/true)) throw Error(part.path + ": write failed");
  const size_t out_data = gguf_get_meta_size(dst.get());
  const size_t in_data = gguf_get_data_offset(src.get());

  RotateProgress p;
  p.tensors = n;
  for (int64_t i = 0; i < gguf_get_n_tensors(dst.get()); ++i) p.total += gguf_get_tensor_size(dst.get(), i);
  int64_t without_importance = 0;
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int64_t i = 0; i < n; ++i) {
    const ggml_tensor* t = ggml_get_tensor(meta.get(), gguf_get_tensor_name(src.get(), i));
    const uint64_t at = in_data + gguf_get_tensor_offset(src.get(), i);
    std::vector<uint8_t> bytes;
    if (rotate[static_cast<size_t>(i)]) {
      std::vector<float> w = read_as_floats(in_file.get(), at, t, in);
      std::vector<float> importance;
      if (options.importance != nullptr) {
        const auto e = options.importance->weights.find(ggml_get_name(t));
        if (e != options.importance->weights.end()) importance = e->second;
        else ++without_importance;
      }
      bytes = rotate_and_quantize(w, t->ne[0], !options.plain, std::move(importance), threads);
    } else {
      bytes.resize(ggml_nbytes(t));
      if (std::fseek(in_file.get(), static_cast<long>(at), SEEK_SET) != 0 ||
          std::fread(bytes.data(), 1, bytes.size(), in_file.get()) != bytes.size())
        throw Error(in + ": truncated: tensor " + ggml_get_name(t) + " ends past the end of the file");
    }
    if (bytes.size() != gguf_get_tensor_size(dst.get(), i)) throw Error(std::string("internal: size of ") + ggml_get_name(t));
    if (std::fseek(out_file.get(), static_cast<long>(out_data + gguf_get_tensor_offset(dst.get(), i)), SEEK_SET) != 0 ||
        std::fwrite(bytes.data(), 1, bytes.size(), out_file.get()) != bytes.size())
      throw Error(part.path + ": write failed (disk full?)");
    p.tensor = i + 1;
    p.bytes += bytes.size();
    if (progress) progress(p);
  }
  // Padding after the last tensor, so the data section has the size its header promises.
  const size_t end = out_data + gguf_get_tensor_offset(dst.get(), n - 1) + gguf_get_tensor_size(dst.get(), n - 1);
  const size_t aligned = (end + gguf_get_alignment(dst.get()) - 1) / gguf_get_alignment(dst.get()) * gguf_get_alignment(dst.get());
  if (aligned > end) {
    const std::vector<uint8_t> zeros(aligned - end, 0);
    if (std::fwrite(zeros.data(), 1, zeros.size(), out_file.get()) != zeros.size()) throw Error(part.path + ": write failed");
  }
  if (std::fflush(out_file.get()) != 0) throw Error(part.path + ": write failed (disk full?)");
  out_file.reset();

  // The check before the file takes its name: every Q4_0 tensor in it is one this run quantized.
  GgufPtr check(gguf_init_from_file(part.path.c_str(), {/*no_alloc=*/true, nullptr}));
  if (!check) throw Error(part.path + ": the written file does not read back");
  for (int64_t i = 0; i < gguf_get_n_tensors(check.get()); ++i)
    if (gguf_get_tensor_type(check.get(), i) == GGML_TYPE_Q4_0 && !rotate[static_cast<size_t>(i)])
      throw Error(std::string("internal: tensor ") + gguf_get_tensor_name(check.get(), i) + " is Q4_0 but was not quantized here");
  std::error_code ec;
  std::filesystem::rename(part.path, out, ec);
  if (ec) throw Error(out + ": cannot write: " + ec.message());
  part.keep = true;
  return {rotated, n - rotated, static_cast<uint64_t>(aligned), without_importance};
}

}  // namespace onebit

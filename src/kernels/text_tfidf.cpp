// TfIdfVectorizer (opset 9) on integer tokens: counts the n-grams of a pool (attribute
// pool_int64s, grouped by length through ngram_counts) in each row of the input,
// n-grams with gaps of up to max_skip_count tokens included, then weighs the counts
// (TF, IDF or TFIDF). The pool is a trie of token -> child; an n-gram's end node holds
// its id, which ngram_indexes maps to an output column. String pools are not supported.
#include <algorithm>
#include <map>
#include <vector>

#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

struct Trie {
  struct Node {
    int64_t id = 0;  // 0: no n-gram ends here
    std::map<int64_t, size_t> next;
  };
  std::vector<Node> nodes{Node{}};
};

struct TfIdf {
  Trie trie;
  int64_t min_n = 1, max_n = 1, max_skip = 0, out_size = 0;
  std::vector<int64_t> indexes;
  std::vector<float> weights;
  enum { kTf, kIdf, kTfIdf } mode = kTf;
};

template <typename Ctx>
TfIdf readTfIdf(const Ctx& c) {
  const ir::AttributeMap& a = c.attrs();
  if (a.has("pool_strings")) unsupportedNode(c.node, "string pools (pool_strings) are not supported");
  TfIdf t;
  t.min_n = a.getInt("min_gram_length", 1);
  t.max_n = a.getInt("max_gram_length", 1);
  t.max_skip = a.getInt("max_skip_count", 0);
  if (t.min_n < 1 || t.max_n < t.min_n || t.max_skip < 0)
    c.fail("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  std::string mode = a.getString("mode", "");
  if (mode == "TF") t.mode = TfIdf::kTf;
  else if (mode == "IDF") t.mode = TfIdf::kIdf;
  else if (mode == "TFIDF") t.mode = TfIdf::kTfIdf;
  else c.fail("unknown mode '" + mode + "' (TF, IDF or TFIDF)");
  std::vector<int64_t> pool = a.getInts("pool_int64s"), counts = a.getInts("ngram_counts");
  t.indexes = a.getInts("ngram_indexes");
  t.weights = a.getFloats("weights");
  if (t.indexes.empty()) c.fail("ngram_indexes is empty");
  for (int64_t i : t.indexes) {
    if (i < 0 || i > (int64_t(1) << 32)) c.fail("ngram_indexes has an out-of-range value " + std::to_string(i));
    t.out_size = std::max(t.out_size, i + 1);
  }
  if (!t.weights.empty() && int64_t(t.weights.size()) < t.out_size)
    c.fail("weights has fewer values than there are output columns");
  int64_t id = 1;
  for (size_t g = 0; g < counts.size(); ++g) {
    const int64_t n = int64_t(g) + 1;
    const int64_t start = counts[g], end = g + 1 < counts.size() ? counts[g + 1] : int64_t(pool.size());
    if (start < 0 || end < start || end > int64_t(pool.size())) c.fail("ngram_counts does not fit pool_int64s");
    const int64_t grams = (end - start) / n;
    if (n < t.min_n || n > t.max_n) {
      id += grams;
      continue;
    }
    for (int64_t k = 0; k < grams; ++k) {
      size_t node = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t tok = pool[size_t(start + k * n + j)];
        auto it = t.trie.nodes[node].next.find(tok);
        if (it == t.trie.nodes[node].next.end()) {
          t.trie.nodes.push_back({});
          it = t.trie.nodes[node].next.emplace(tok, t.trie.nodes.size() - 1).first;
        }
        node = it->second;
      }
      if (id - 1 >= int64_t(t.indexes.size())) c.fail("more n-grams in the pool than ngram_indexes");
      t.trie.nodes[node].id = id++;
    }
  }
  return t;
}

void inferTfIdf(InferContext& c) {
  checkArity(c, 1, 1);
  const ir::TensorType& x = c.input(0);
  if (x.dtype != ir::DType::kInt32 && x.dtype != ir::DType::kInt64)
    c.fail("input must be int32 or int64, got " + std::string(ir::dtypeName(x.dtype)));
  TfIdf t = readTfIdf(c);
  if (x.has_rank && x.rank() > 2) c.fail("input must be [C] or [N, C], got " + x.str());
  ir::TensorType out{ir::DType::kFloat32, true, {}};
  if (x.has_rank && x.rank() == 2) out.dims.push_back(x.dims[0]);
  out.dims.push_back(ir::Dim::known(t.out_size));
  c.outputs[0] = x.has_rank ? out : ir::TensorType::unranked(ir::DType::kFloat32);
}

void runTfIdf(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  TfIdf t = readTfIdf(c);
  std::vector<int64_t> tokens = readInts(x);
  const int64_t rows = x.rank() == 2 ? x.shape[0] : 1, len = x.rank() == 0 ? 1 : x.shape.back();
  std::vector<int64_t> freq(size_t(rows * t.out_size), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tokens.data() + r * len;
    int64_t first_n = t.min_n;
    for (int64_t skip = 1; skip <= t.max_skip + 1; ++skip) {
      for (int64_t start = 0; start < len; ++start) {
        if (start + skip * (first_n - 1) >= len) break;
        size_t node = 0;
        int64_t item = start;
        for (int64_t n = 1; n <= t.max_n && item < len && !t.trie.nodes[node].next.empty(); ++n, item += skip) {
          auto it = t.trie.nodes[node].next.find(row[item]);
          if (it == t.trie.nodes[node].next.end()) break;
          node = it->second;
          const int64_t id = t.trie.nodes[node].id;
          if (n >= first_n && id != 0) ++freq[size_t(r * t.out_size + t.indexes[size_t(id - 1)])];
        }
      }
      // Unigrams are counted once, not once per skip distance.
      if (first_n == 1) {
        first_n = 2;
        if (first_n > t.max_n) break;
      }
    }
  }
  float* y = c.outputs[0].as<float>();
  if (c.outputs[0].numel() != int64_t(freq.size())) c.fail("output has the wrong size");
  for (size_t p = 0; p < freq.size(); ++p) {
    const size_t col = p % size_t(t.out_size);
    const float w = t.weights.empty() ? 1.0f : t.weights[col];
    switch (t.mode) {
      case TfIdf::kTf: y[p] = float(freq[p]); break;
      case TfIdf::kIdf: y[p] = freq[p] > 0 ? w : 0.0f; break;
      case TfIdf::kTfIdf: y[p] = w * float(freq[p]); break;
    }
  }
}

}  // namespace

void registerTextOps(OpRegistry& r) { r.add("TfIdfVectorizer", {inferTfIdf, runTfIdf}); }

}  // namespace partita::kernels

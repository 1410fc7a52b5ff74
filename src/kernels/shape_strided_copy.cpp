#include "kernels/shape_strided_copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace partita::kernels {

namespace {

// Copies at or above this many bytes are split across the kernel threads.
constexpr int64_t kParallelBytes = int64_t(1) << 18;
// Side of the square blocks of the tiled transpose (elements).
constexpr int64_t kTile = 16;

struct View {
  std::vector<int64_t> shape, dst, src;
};

// Drops size-1 dimensions and merges neighbours that are contiguous in both views, so
// that e.g. a transpose keeping the inner axes becomes a copy of long rows. Returns
// false when the view holds no element.
bool simplify(View& v) {
  View out;
  for (size_t k = 0; k < v.shape.size(); ++k) {
    if (v.shape[k] == 0) return false;
    if (v.shape[k] == 1) continue;
    if (!out.shape.empty()) {
      size_t p = out.shape.size() - 1;
      if (out.dst[p] == v.dst[k] * v.shape[k] && out.src[p] == v.src[k] * v.shape[k]) {
        out.shape[p] *= v.shape[k];
        out.dst[p] = v.dst[k];
        out.src[p] = v.src[k];
        continue;
      }
    }
    out.shape.push_back(v.shape[k]);
    out.dst.push_back(v.dst[k]);
    out.src.push_back(v.src[k]);
  }
  v = std::move(out);
  return true;
}

// Walks the multi-indices of a subset of a view's dimensions in row-major order and
// tracks the matching element offsets in both views.
class OuterWalk {
 public:
  OuterWalk(const View& v, const std::vector<size_t>& dims) {
    for (size_t d : dims) {
      shape_.push_back(v.shape[d]);
      dst_.push_back(v.dst[d]);
      src_.push_back(v.src[d]);
    }
    idx_.assign(shape_.size(), 0);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : shape_) n *= s;
    return n;
  }
  void seek(int64_t linear) {
    dst_off = src_off = 0;
    for (size_t k = shape_.size(); k-- > 0;) {
      idx_[k] = linear % shape_[k];
      linear /= shape_[k];
      dst_off += idx_[k] * dst_[k];
      src_off += idx_[k] * src_[k];
    }
  }
  void next() {
    for (size_t k = shape_.size(); k-- > 0;) {
      dst_off += dst_[k];
      src_off += src_[k];
      if (++idx_[k] < shape_[k]) return;
      dst_off -= dst_[k] * shape_[k];
      src_off -= src_[k] * shape_[k];
      idx_[k] = 0;
    }
  }

  int64_t dst_off = 0, src_off = 0;

 private:
  std::vector<int64_t> shape_, dst_, src_, idx_;
};

// Runs f(begin, end) over [0, count), split evenly across threads when `parallel`.
template <typename F>
void forRanges(int64_t count, bool parallel, F&& f) {
  if (!parallel || count < 2) {
    f(int64_t(0), count);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t begin = count * t / nt, end = count * (t + 1) / nt;
    if (begin < end) f(begin, end);
  }
}

template <size_t ES>
void copyRow(std::byte* d, int64_t ds, const std::byte* s, int64_t ss, int64_t n) {
  if (ds == 1 && ss == 0) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * int64_t(ES), s, ES);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds * int64_t(ES), s + i * ss * int64_t(ES), ES);
}

// d[a * da + b] = s[a + b * sb] for a < na, b < nb, in 8x8 micro tiles: a tile touches
// only 8 source and 8 destination cache lines, so power-of-two strides (which map
// every row to the same cache set) do not thrash.
template <size_t ES>
void transposeBlock(std::byte* d, int64_t da, const std::byte* s, int64_t sb, int64_t na, int64_t nb) {
  constexpr int64_t es = int64_t(ES);
  constexpr int64_t kMicro = 8;
  for (int64_t b0 = 0; b0 < nb; b0 += kMicro) {
    const int64_t bn = std::min(kMicro, nb - b0);
    for (int64_t a0 = 0; a0 < na; a0 += kMicro) {
      const int64_t an = std::min(kMicro, na - a0);
      if (an == kMicro && bn == kMicro) {
        std::byte tile[kMicro][kMicro][ES];
        for (int64_t b = 0; b < kMicro; ++b)
          for (int64_t a = 0; a < kMicro; ++a)
            std::memcpy(tile[a][b], s + ((a0 + a) + (b0 + b) * sb) * es, ES);
        for (int64_t a = 0; a < kMicro; ++a)
          for (int64_t b = 0; b < kMicro; ++b) std::memcpy(d + ((a0 + a) * da + b0 + b) * es, tile[a][b], ES);
        continue;
      }
      for (int64_t a = a0; a < a0 + an; ++a)
        for (int64_t b = b0; b < b0 + bn; ++b) std::memcpy(d + (a * da + b) * es, s + (a + b * sb) * es, ES);
    }
  }
}

template <size_t ES>
void copyView(std::byte* dst, const std::byte* src, const View& v, bool parallel) {
  constexpr int64_t es = int64_t(ES);
  const size_t r = v.shape.size();
  const size_t last = r - 1;
  const int64_t n = v.shape[last], ds = v.dst[last], ss = v.src[last];

  // Tiled transpose: the source's contiguous axis lands on an outer axis of the
  // destination while the destination's contiguous axis strides through the source.
  if (ds == 1 && ss != 1 && ss != 0 && r >= 2) {
    size_t j = r;
    for (size_t k = 0; k < last; ++k)
      if (v.src[k] == 1 && v.shape[k] >= 4) j = k;
    if (j != r) {
      std::vector<size_t> outer;
      for (size_t k = 0; k < last; ++k)
        if (k != j) outer.push_back(k);
      const int64_t na = v.shape[j], da = v.dst[j];
      const int64_t blocks = (na + kTile - 1) / kTile;
      OuterWalk probe(v, outer);
      const int64_t items = probe.count() * blocks;
      forRanges(items, parallel, [&](int64_t begin, int64_t end) {
        OuterWalk w(v, outer);
        w.seek(begin / blocks);
        int64_t current = begin / blocks;
        for (int64_t it = begin; it < end; ++it) {
          int64_t o = it / blocks, blk = it % blocks;
          while (current < o) {
            w.next();
            ++current;
          }
          int64_t a0 = blk * kTile, a1 = std::min(na, a0 + kTile);
          transposeBlock<ES>(dst + (w.dst_off + a0 * da) * es, da, src + (w.src_off + a0) * es, ss, a1 - a0,
                             n);
        }
      });
      return;
    }
  }

  std::vector<size_t> outer;
  for (size_t k = 0; k < last; ++k) outer.push_back(k);
  OuterWalk probe(v, outer);
  forRanges(probe.count(), parallel, [&](int64_t begin, int64_t end) {
    OuterWalk w(v, outer);
    w.seek(begin);
    for (int64_t o = begin; o < end; ++o, w.next()) {
      std::byte* d = dst + w.dst_off * es;
      const std::byte* s = src + w.src_off * es;
      if (ds == 1 && ss == 1)
        std::memcpy(d, s, size_t(n * es));
      else
        copyRow<ES>(d, ds, s, ss, n);
    }
  });
}

}  // namespace

void copyStrided(std::byte* dst, const std::vector<int64_t>& dst_strides, const std::byte* src,
                 const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                 size_t elem_size) {
  View v{shape, dst_strides, src_strides};
  if (!simplify(v)) return;
  if (v.shape.empty()) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  int64_t numel = 1;
  for (int64_t s : v.shape) numel *= s;
  const bool parallel = numel * int64_t(elem_size) >= kParallelBytes && omp_get_max_threads() > 1;
  switch (elem_size) {
    case 1:
      copyView<1>(dst, src, v, parallel);
      break;
    case 2:
      copyView<2>(dst, src, v, parallel);
      break;
    case 4:
      copyView<4>(dst, src, v, parallel);
      break;
    case 8:
      copyView<8>(dst, src, v, parallel);
      break;
    default: {
      // Other element sizes: treat each element as a row of bytes.
      v.shape.push_back(int64_t(elem_size));
      v.dst.push_back(1);
      v.src.push_back(1);
      for (size_t k = 0; k + 1 < v.shape.size(); ++k) {
        v.dst[k] *= int64_t(elem_size);
        v.src[k] *= int64_t(elem_size);
      }
      copyView<1>(dst, src, v, parallel);
    }
  }
}

void copyStridedToDense(std::byte* dst, const std::byte* src, const std::vector<int64_t>& src_strides,
                        const std::vector<int64_t>& shape, size_t elem_size) {
  std::vector<int64_t> dense(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) dense[k - 1] = dense[k] * shape[k];
  copyStrided(dst, dense, src, src_strides, shape, elem_size);
}

void fillElements(std::byte* dst, const std::byte* value, int64_t count, size_t elem_size) {
  if (count <= 0) return;
  bool same = true;
  for (size_t b = 1; b < elem_size; ++b) same = same && value[b] == value[0];
  if (same) {
    std::memset(dst, int(value[0]), size_t(count) * elem_size);
    return;
  }
  std::memcpy(dst, value, elem_size);
  // Doubling copies: each pass copies what is already filled.
  int64_t done = 1;
  while (done < count) {
    int64_t chunk = std::min(done, count - done);
    std::memcpy(dst + done * int64_t(elem_size), dst, size_t(chunk) * elem_size);
    done += chunk;
  }
}

}  // namespace partita::kernels

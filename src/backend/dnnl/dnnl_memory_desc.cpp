#include "backend/dnnl/dnnl_memory_desc.h"

#include <algorithm>
#include <numeric>

#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

memory::dims dnnlDims(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1};
  return memory::dims(shape.begin(), shape.end());
}

std::string joined(const int64_t* v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

const char* typeName(dnnl_data_type_t t) {
  switch (t) {
    case dnnl_f32:
      return "f32";
    case dnnl_s32:
      return "s32";
    case dnnl_s8:
      return "s8";
    case dnnl_u8:
      return "u8";
    case dnnl_f16:
      return "f16";
    case dnnl_bf16:
      return "bf16";
    default:
      return "undef";
  }
}

}  // namespace

const char* dataTypeName(const memory::desc& md) { return typeName(md.data.data_type); }

memory::desc plainDesc(const std::vector<int64_t>& shape) {
  memory::dims dims = dnnlDims(shape);
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc withStrides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

memory::desc lastTwoSwapped(const std::vector<int64_t>& dims) {
  const size_t r = dims.size();
  std::vector<int64_t> strides(r, 1);
  if (r >= 2) {
    strides[r - 2] = 1;
    strides[r - 1] = dims[r - 2];
    int64_t acc = dims[r - 2] * dims[r - 1];
    for (size_t i = r - 2; i-- > 0;) {
      strides[i] = acc;
      acc *= dims[i];
    }
  }
  return withStrides(dims, strides);
}

std::vector<int64_t> dimsOf(const memory::desc& md) {
  memory::dims d = md.dims();
  return std::vector<int64_t>(d.begin(), d.end());
}

memory::desc denseLike(const memory::desc& md, const std::vector<int64_t>& dims) {
  const dnnl_memory_desc_t& c = md.data;
  if (c.format_kind != dnnl_blocked || c.format_desc.blocking.inner_nblks != 0 || size_t(c.ndims) != dims.size())
    return plainDesc(dims);
  // Outermost first: larger strides first, equal strides in logical order.
  std::vector<size_t> order(dims.size());
  std::iota(order.begin(), order.end(), size_t(0));
  const int64_t* s = c.format_desc.blocking.strides;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
  std::vector<int64_t> strides(dims.size());
  int64_t next = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[order[i]] = next;
    next *= std::max<int64_t>(dims[order[i]], 1);
  }
  return withStrides(dims, strides);
}

bool isDenseUnblocked(const memory::desc& md) {
  const dnnl_memory_desc_t& c = md.data;
  return c.format_kind == dnnl_blocked && c.format_desc.blocking.inner_nblks == 0 && c.offset0 == 0 &&
         !hasPadding(md) && uint64_t(md.get_size()) == uint64_t(numElements(md)) * memory::data_type_size(md.data_type());
}

std::vector<int64_t> elementStrides(const memory::desc& md) {
  const dnnl_memory_desc_t& c = md.data;
  return std::vector<int64_t>(c.format_desc.blocking.strides, c.format_desc.blocking.strides + c.ndims);
}

memory::desc anyDesc(const memory::desc& md) {
  return memory::desc(md.dims(), memory::data_type(md.data.data_type), memory::format_tag::any);
}

memory::desc withDataType(memory::desc md, memory::data_type t) {
  md.data.data_type = dnnl_data_type_t(t);
  return md;
}

memory::desc anyDesc(const std::vector<int64_t>& shape) {
  return memory::desc(dnnlDims(shape), memory::data_type::f32, memory::format_tag::any);
}

bool isAny(const memory::desc& md) { return md.data.format_kind == dnnl_format_kind_any; }

int64_t numElements(const memory::desc& md) {
  int64_t n = 1;
  for (int i = 0; i < md.data.ndims; ++i) n *= md.data.dims[i];
  return n;
}

bool hasPadding(const memory::desc& md) {
  for (int i = 0; i < md.data.ndims; ++i)
    if (md.data.padded_dims[i] != md.data.dims[i] || md.data.padded_offsets[i] != 0) return true;
  return false;
}

bool isDenseInOrder(const memory::desc& md, const std::vector<int>& order) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 || d.offset0 != 0 ||
      hasPadding(md) || order.size() != size_t(d.ndims))
    return false;
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const int i = order[k];
    if (d.dims[i] != 1 && d.format_desc.blocking.strides[i] != expect) return false;
    expect *= d.dims[i];
  }
  return true;
}

bool isPlainDense(const memory::desc& md) {
  std::vector<int> order(size_t(std::max(md.data.ndims, 0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  return isDenseInOrder(md, order);
}

std::optional<memory::desc> composeViews(const memory::desc& inner, const memory::desc& outer) {
  auto strided = [](const memory::desc& md) {
    const dnnl_memory_desc_t& d = md.data;
    return d.format_kind == dnnl_blocked && d.format_desc.blocking.inner_nblks == 0 && !hasPadding(md) &&
           d.offset0 >= 0;
  };
  if (!strided(inner) || !strided(outer) || inner.data.data_type != outer.data.data_type) return std::nullopt;
  const std::vector<int64_t> d1 = dimsOf(inner), s1 = elementStrides(inner);
  const std::vector<int64_t> d2 = dimsOf(outer), s2 = elementStrides(outer);
  std::vector<int64_t> rows(d1.size(), 1);  // B's row-major strides
  for (size_t m = d1.size(); m-- > 1;) rows[m - 1] = rows[m] * d1[m];
  const int64_t total = d1.empty() ? 1 : rows[0] * d1[0];
  // Where outer starts in B, as an index of inner's dims; from there, the highest index
  // each of inner's dims reaches.
  int64_t rest = outer.data.offset0;
  if (rest >= total) return std::nullopt;
  std::vector<int64_t> reach(d1.size());
  int64_t offset = inner.data.offset0;
  for (size_t m = 0; m < d1.size(); ++m) {
    reach[m] = rest / rows[m];
    rest %= rows[m];
    offset += reach[m] * s1[m];
  }
  std::vector<int64_t> strides(d2.size(), 1);  // a dim of size 1: any stride
  for (size_t k = 0; k < d2.size(); ++k) {
    if (d2[k] == 1) continue;
    // The one dim m of inner with rows[m] <= s2[k] < rows[m] * d1[m], stepped q at a time.
    size_t m = 0;
    while (m < d1.size() && !(d1[m] > 1 && s2[k] >= rows[m] && s2[k] / rows[m] < d1[m])) ++m;
    if (m == d1.size() || s2[k] % rows[m] != 0) return std::nullopt;
    const int64_t q = s2[k] / rows[m];
    reach[m] += q * (d2[k] - 1);
    if (reach[m] >= d1[m]) return std::nullopt;  // would carry into the next dim
    strides[k] = q * s1[m];
  }
  memory::desc md = withStrides(d2, strides);
  md.data.data_type = inner.data.data_type;
  md.data.offset0 = offset;
  return md;
}

uint64_t extentBytes(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return md.get_size();
  // The last element any index reaches: offset0, plus (outer blocks - 1) * stride per
  // dim, plus the inner block. Descriptors come from readDesc, so every value is
  // bounded (dims and strides < 2^40, at most 12 dims): no overflow in 128 bits.
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int64_t> block(size_t(d.ndims), 1);
  int64_t inner = 1;
  for (int k = 0; k < b.inner_nblks; ++k) {
    block[size_t(b.inner_idxs[k])] *= b.inner_blks[k];
    inner *= b.inner_blks[k];
  }
  unsigned __int128 last = uint64_t(d.offset0) + uint64_t(inner - 1);
  for (int i = 0; i < d.ndims; ++i) {
    if (d.padded_dims[i] == 0) return 0;
    const int64_t outer = (d.padded_dims[i] + block[size_t(i)] - 1) / block[size_t(i)];
    last += (unsigned __int128)(outer - 1) * uint64_t(b.strides[i]);
  }
  const unsigned __int128 bytes = (last + 1) * dnnl_data_type_size(d.data_type);
  return bytes > UINT64_MAX ? UINT64_MAX : uint64_t(bytes);
}

bool isChannelsLastDense(const memory::desc& md) {
  const int n = md.data.ndims;
  if (n < 3) return false;
  std::vector<int> order = {0};  // N, the spatial dims, C
  for (int i = 2; i < n; ++i) order.push_back(i);
  order.push_back(1);
  return isDenseInOrder(md, order);
}

bool sameDesc(const memory::desc& a, const memory::desc& b) {
  return dnnl_memory_desc_equal(&a.data, &b.data) != 0;
}

std::string formatTag(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind == dnnl_format_kind_any) return "any";
  if (d.format_kind == dnnl_format_kind_wino) return "wino";
  if (d.format_kind != dnnl_blocked) return "opaque";
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int> order(size_t(d.ndims));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string s;
  for (int i : order) {
    bool blocked = false;
    for (int k = 0; k < b.inner_nblks; ++k) blocked |= b.inner_idxs[k] == i;
    s += char((blocked ? 'A' : 'a') + i);
  }
  for (int k = 0; k < b.inner_nblks; ++k) s += std::to_string(b.inner_blks[k]) + char('a' + b.inner_idxs[k]);
  return s;
}

std::string layoutTag(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  return std::string("dnnl:") + typeName(d.data_type) + ":" + formatTag(md) + ":" + joined(d.dims, d.ndims);
}

std::string layoutString(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  std::string s = std::string("dnnl:") + typeName(d.data_type) + ":" + formatTag(md);
  s += ":dims=" + joined(d.dims, d.ndims);
  if (d.format_kind == dnnl_format_kind_wino) {
    const dnnl_wino_desc_t& v = d.format_desc.wino_desc;
    return s + ":wino=" + std::to_string(int(v.wino_format)) + "," + std::to_string(v.alpha) + "," +
           std::to_string(v.ic_block) + "," + std::to_string(v.oc_block) + "," + std::to_string(v.ic2_block) + "," +
           std::to_string(v.oc2_block) + ":size=" + std::to_string(v.size);
  }
  if (d.format_kind != dnnl_blocked) return s;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  s += ":padded=" + joined(d.padded_dims, d.ndims);
  s += ":offsets=" + joined(d.padded_offsets, d.ndims);
  s += ":offset0=" + std::to_string(d.offset0);
  s += ":strides=" + joined(b.strides, d.ndims);
  s += ":blocks=" + joined(b.inner_blks, b.inner_nblks);
  s += ":block_dims=" + joined(b.inner_idxs, b.inner_nblks);
  return s;
}

// Set in the encoded format kind when the extra data of an int8 weights descriptor
// (oneDNN's compensation flags and masks) follows the blocking.
constexpr int32_t kExtraFollows = 0x10000;

void writeDesc(BlobWriter& w, const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if ((d.extra.flags != 0 && d.format_kind != dnnl_blocked) ||
      (d.format_kind != dnnl_blocked && d.format_kind != dnnl_format_kind_any && d.format_kind != dnnl_format_kind_wino))
    throw Error(ErrorCode::kInternal, "dnnl backend: cannot encode memory descriptor " + layoutString(md));
  w.i32(d.ndims);
  w.i32(int32_t(d.data_type));
  w.i32(int32_t(d.format_kind) | (d.extra.flags != 0 ? kExtraFollows : 0));
  for (int i = 0; i < d.ndims; ++i) w.i64(d.dims[i]);
  if (d.format_kind == dnnl_format_kind_any) return;
  if (d.format_kind == dnnl_format_kind_wino) {  // Winograd weights: oneDNN's own layout
    const dnnl_wino_desc_t& v = d.format_desc.wino_desc;
    for (int x : {int(v.wino_format), v.r, v.alpha, v.ic, v.oc, v.ic_block, v.oc_block, v.ic2_block, v.oc2_block})
      w.i32(x);
    w.f32(v.adj_scale);
    w.u64(v.size);
    return;
  }
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < d.ndims; ++i) w.i64(d.padded_dims[i]);
  for (int i = 0; i < d.ndims; ++i) w.i64(d.padded_offsets[i]);
  w.i64(d.offset0);
  for (int i = 0; i < d.ndims; ++i) w.i64(b.strides[i]);
  w.i32(b.inner_nblks);
  for (int k = 0; k < b.inner_nblks; ++k) w.i64(b.inner_blks[k]);
  for (int k = 0; k < b.inner_nblks; ++k) w.i64(b.inner_idxs[k]);
  if (d.extra.flags == 0) return;
  w.u64(d.extra.flags);
  w.i32(d.extra.compensation_mask);
  w.f32(d.extra.scale_adjust);
  w.i32(d.extra.asymm_compensation_mask);
}

namespace {

// Winograd weights (float32, [O, I, 3, 3]) in oneDNN's wino layout. The fields are
// range-checked here; that they are the ones oneDNN would make is checked when the
// primitive is created (createPrimitive accepts a recorded wino layout only when
// oneDNN chooses the same one).
memory::desc readWino(BlobReader& r, const memory::dims& dims, int32_t dt) {
  const std::string what = "memory descriptor (wino): ";
  if (dims.size() != 4 || dt != dnnl_f32) r.fail(what + "not float32 weights of rank 4");
  dnnl_memory_desc_t d{};
  d.ndims = 4;
  d.data_type = dnnl_f32;
  d.format_kind = dnnl_format_kind_wino;
  for (int i = 0; i < 4; ++i) d.dims[i] = d.padded_dims[i] = dims[size_t(i)];
  dnnl_wino_desc_t& v = d.format_desc.wino_desc;
  const int32_t format = r.i32();
  if (format != dnnl_wino_wei_aaOIoi && format != dnnl_wino_wei_aaOio && format != dnnl_wino_wei_aaOBiOo &&
      format != dnnl_wino_wei_OBaaIBOIio)
    r.fail(what + "unknown format " + std::to_string(format));
  v.wino_format = dnnl_wino_memory_format_t(format);
  for (int* x : {&v.r, &v.alpha, &v.ic, &v.oc, &v.ic_block, &v.oc_block, &v.ic2_block, &v.oc2_block}) {
    *x = r.i32();
    if (*x < 0 || *x > (1 << 20)) r.fail(what + "field out of range");
  }
  v.adj_scale = r.f32();
  v.size = r.u64();
  if (v.size > (uint64_t(1) << 40)) r.fail(what + "size out of range");
  return memory::desc(d);
}

}  // namespace

memory::desc readDesc(BlobReader& r) {
  const std::string what = "memory descriptor: ";
  int32_t ndims = r.i32();
  if (ndims < 1 || ndims > DNNL_MAX_NDIMS) r.fail(what + "rank " + std::to_string(ndims) + " out of range");
  int32_t dt = r.i32();
  if (dt != dnnl_f32 && dt != dnnl_s32 && dt != dnnl_bf16 && dt != dnnl_f16 && dt != dnnl_s8 && dt != dnnl_u8)
    r.fail(what + "unsupported data type " + std::to_string(dt));
  int32_t kind = r.i32();
  const bool extra = (kind & kExtraFollows) != 0;
  kind &= ~kExtraFollows;
  if (extra && kind != dnnl_blocked) r.fail(what + "extra data on a non-blocked descriptor");
  if (kind != dnnl_blocked && kind != dnnl_format_kind_any && kind != dnnl_format_kind_wino)
    r.fail(what + "unsupported format kind " + std::to_string(kind));
  memory::dims dims(size_t(ndims), 0);
  for (auto& x : dims) {
    x = r.i64();
    if (x < 0 || x > (int64_t(1) << 40)) r.fail(what + "dimension " + std::to_string(x) + " out of range");
  }
  if (kind == dnnl_format_kind_any) return memory::desc(dims, memory::data_type(dt), memory::format_tag::any);
  if (kind == dnnl_format_kind_wino) return readWino(r, dims, dt);

  dnnl_memory_desc_t d{};
  d.ndims = ndims;
  d.data_type = dnnl_data_type_t(dt);
  d.format_kind = dnnl_blocked;
  for (int i = 0; i < ndims; ++i) d.dims[i] = dims[size_t(i)];
  for (int i = 0; i < ndims; ++i) {
    d.padded_dims[i] = r.i64();
    if (d.padded_dims[i] < d.dims[i] || d.padded_dims[i] > (int64_t(1) << 40))
      r.fail(what + "bad padded dimension");
  }
  for (int i = 0; i < ndims; ++i) {
    d.padded_offsets[i] = r.i64();
    if (d.padded_offsets[i] < 0 || d.padded_offsets[i] > d.padded_dims[i]) r.fail(what + "bad padded offset");
  }
  d.offset0 = r.i64();
  if (d.offset0 < 0 || d.offset0 > (int64_t(1) << 40)) r.fail(what + "offset0 out of range");
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < ndims; ++i) {
    b.strides[i] = r.i64();
    if (b.strides[i] < 0 || b.strides[i] > (int64_t(1) << 40)) r.fail(what + "stride out of range");
  }
  b.inner_nblks = r.i32();
  if (b.inner_nblks < 0 || b.inner_nblks > DNNL_MAX_NDIMS) r.fail(what + "bad inner block count");
  for (int k = 0; k < b.inner_nblks; ++k) {
    b.inner_blks[k] = r.i64();
    if (b.inner_blks[k] < 1 || b.inner_blks[k] > 4096) r.fail(what + "bad inner block size");
  }
  for (int k = 0; k < b.inner_nblks; ++k) {
    b.inner_idxs[k] = r.i64();
    if (b.inner_idxs[k] < 0 || b.inner_idxs[k] >= ndims) r.fail(what + "bad inner block dimension");
  }
  // Padding only as oneDNN's own layouts have it: each dim rounded up to the product of
  // its inner blocks, no padded offsets. (A fuzzed blob's plain [1, 1, 4, 4] pooling
  // destination with other padded dims made oneDNN pick its reference pooling, which
  // ran for minutes over the padding.)
  for (int i = 0; i < ndims; ++i) {
    int64_t block = 1;
    for (int k = 0; k < b.inner_nblks; ++k)
      if (b.inner_idxs[k] == i && (block *= b.inner_blks[k]) > 65536) r.fail(what + "inner blocks too large");
    const int64_t padded = (d.dims[i] + block - 1) / block * block;
    if (d.padded_dims[i] != padded || d.padded_offsets[i] != 0)
      r.fail(what + "padded dimension " + std::to_string(d.padded_dims[i]) + " (offset " +
             std::to_string(d.padded_offsets[i]) + ") where dimension " + std::to_string(d.dims[i]) +
             " in blocks of " + std::to_string(block) + " gives " + std::to_string(padded));
  }
  if (extra) {  // int8 weights: the compensation oneDNN keeps after them
    d.extra.flags = r.u64();
    const uint64_t known = dnnl_memory_extra_flag_compensation_conv_s8s8 | dnnl_memory_extra_flag_scale_adjust |
                           dnnl_memory_extra_flag_rnn_u8s8_compensation |
                           dnnl_memory_extra_flag_compensation_conv_asymmetric_src;
    if ((d.extra.flags & ~known) != 0) r.fail(what + "unknown extra flags " + std::to_string(d.extra.flags));
    d.extra.compensation_mask = r.i32();
    d.extra.scale_adjust = r.f32();
    d.extra.asymm_compensation_mask = r.i32();
    if (d.data_type != dnnl_s8) r.fail(what + "compensation on a descriptor that is not s8");
  }
  return memory::desc(d);
}

}  // namespace partita::dnnl_backend

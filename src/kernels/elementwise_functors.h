// The elementwise functors of the host kernels, one element at a time: the binary
// arithmetic ops and the unary math functions and activations. Shared by the host
// kernels (ops_elementwise.cpp, elementwise_unary.cpp) and by backends that must
// compute exactly what the host computes (src/backend/ewise/).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/elementwise_broadcast.h"
#include "kernels/elementwise_dispatch.h"
#include "kernels/elementwise_math.h"
#include "ir/attribute.h"

namespace partita::kernels::elementwise {

// ---------------------------------------------------------------------------------
// Binary functors: T op T -> T (or bool).

struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Wide<T>(a) + Wide<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Wide<T>(a) - Wide<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Wide<T>(a) * Wide<T>(b));
    else
      return a * b;
  }
};
// Integer division truncates toward zero (C semantics). Division by zero gives 0
// rather than a trap, and INT_MIN / -1 wraps.
struct DivOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(Wide<T>(0) - Wide<T>(a));
      return T(a / b);
    } else {
      return a / b;
    }
  }
};
// Mod with fmod=1: the remainder has the sign of the dividend (C fmod / %).
struct FmodOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
      return T(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
// Mod with fmod=0: the remainder has the sign of the divisor (Python / numpy mod).
struct FloorModOp {
  template <class T>
  T operator()(T a, T b) const {
    T r = FmodOp{}(a, b);
    if constexpr (std::is_unsigned_v<T>) {
      return r;
    } else {
      if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
      return r;
    }
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;  // NaN wins, as in numpy.maximum
      return (b > a || b != b) ? b : a;
    } else {
      return b > a ? b : a;
    }
  }
};
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      return (b < a || b != b) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};
// Unary functors. Each has `Set` (the dtypes it takes), `kCost`, and may read its
// attributes in a constructor from the node's AttributeMap.

template <class T>
T wrapNeg(T x) {
  if constexpr (std::is_integral_v<T>)
    return T(Wide<T>(0) - Wide<T>(x));
  else
    return -x;
}

struct AbsOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else if constexpr (std::is_signed_v<T>)
      return x < 0 ? wrapNeg(x) : x;
    else
      return x;
  }
};
struct NegOp {
  static constexpr unsigned Set = kFloats | kSigned;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return wrapNeg(x);
  }
};
struct SignOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);  // keeps NaN and 0
    else
      return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
  }
};
struct ReluOp {
  static constexpr unsigned Set = kFloats | kSigned;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct ReciprocalOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  template <class T>
  T operator()(T x) const {
    return T(1) / x;
  }
};
// Floor and Ceil through round-to-nearest, which vectorises (std::floor does not
// without -fno-trapping-math).
struct FloorOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T r = std::nearbyint(x);
    return r > x ? r - T(1) : r;
  }
};
struct CeilOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T r = std::nearbyint(x);
    return r < x ? r + T(1) : r;
  }
};
// Round half to even: the default rounding mode.
struct RoundOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return std::nearbyint(x);
  }
};

#define PARTITA_FLOAT_UNARY(NAME, COST, EXPR) \
  struct NAME {                               \
    static constexpr unsigned Set = kFloats;  \
    static constexpr int64_t kCost = COST;    \
    template <class T>                        \
    T operator()(T x) const {                 \
      return EXPR;                            \
    }                                         \
  };
PARTITA_FLOAT_UNARY(ExpOp, kMedium, expOf(x))
PARTITA_FLOAT_UNARY(LogOp, kExpensive, std::log(x))
PARTITA_FLOAT_UNARY(SqrtOp, kMedium, std::sqrt(x))
PARTITA_FLOAT_UNARY(SinOp, kExpensive, std::sin(x))
PARTITA_FLOAT_UNARY(CosOp, kExpensive, std::cos(x))
PARTITA_FLOAT_UNARY(TanOp, kExpensive, std::tan(x))
PARTITA_FLOAT_UNARY(AsinOp, kExpensive, std::asin(x))
PARTITA_FLOAT_UNARY(AcosOp, kExpensive, std::acos(x))
PARTITA_FLOAT_UNARY(AtanOp, kExpensive, std::atan(x))
PARTITA_FLOAT_UNARY(SinhOp, kExpensive, std::sinh(x))
PARTITA_FLOAT_UNARY(CoshOp, kExpensive, std::cosh(x))
PARTITA_FLOAT_UNARY(AsinhOp, kExpensive, std::asinh(x))
PARTITA_FLOAT_UNARY(AcoshOp, kExpensive, std::acosh(x))
PARTITA_FLOAT_UNARY(AtanhOp, kExpensive, std::atanh(x))
PARTITA_FLOAT_UNARY(ErfOp, kMedium, erfOf(x))
PARTITA_FLOAT_UNARY(TanhOp, kMedium, tanhOf(x))
PARTITA_FLOAT_UNARY(SigmoidOp, kMedium, T(1) / (T(1) + expOf(-x)))
PARTITA_FLOAT_UNARY(SoftsignOp, kMedium, x / (T(1) + std::fabs(x)))
// log(1 + e^x) without overflow for large x.
PARTITA_FLOAT_UNARY(SoftplusOp, kExpensive, x > T(0) ? x + std::log1p(expOf(-x)) : std::log1p(expOf(x)))
// x tanh(softplus(x)) (opset 18)
PARTITA_FLOAT_UNARY(MishOp, kExpensive,
                    x * tanhOf(x > T(0) ? x + std::log1p(expOf(-x)) : std::log1p(expOf(x))))
#undef PARTITA_FLOAT_UNARY

// Gelu (opset 20): x/2 (1 + erf(x / sqrt 2)), or with approximate="tanh"
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kExpensive;
  bool tanh_approx = false;
  explicit GeluOp(const ir::AttributeMap& a) {
    std::string m = a.getString("approximate", "none");
    if (m != "none" && m != "tanh") throw Error(ErrorCode::kInvalidModel, "Gelu: unknown approximate '" + m + "'");
    tanh_approx = m == "tanh";
  }
  template <class T>
  T operator()(T x) const {
    if (tanh_approx)
      return T(0.5) * x * (T(1) + tanhOf(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
    return T(0.5) * x * (T(1) + erfOf(x * T(0.7071067811865476)));
  }
};

struct BitNotOp {
  static constexpr unsigned Set = kIntegers;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return T(~x);
  }
};

struct LeakyReluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha;
  explicit LeakyReluOp(float alpha_) : alpha(alpha_) {}
  explicit LeakyReluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 0.01f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
};
struct ThresholdedReluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha;
  explicit ThresholdedReluOp(float alpha_) : alpha(alpha_) {}
  explicit ThresholdedReluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
};
struct EluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha;
  explicit EluOp(float alpha_) : alpha(alpha_) {}
  explicit EluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * expm1Of(x) : x;
  }
};
struct SeluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha, gamma;
  SeluOp(float alpha_, float gamma_) : alpha(alpha_), gamma(gamma_) {}
  explicit SeluOp(const ir::AttributeMap& a)
      : alpha(a.getFloat("alpha", 1.67326319217681884765625f)),
        gamma(a.getFloat("gamma", 1.05070102214813232421875f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? T(gamma) * x : T(gamma) * T(alpha) * expm1Of(x);
  }
};
struct CeluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha;
  explicit CeluOp(float alpha_) : alpha(alpha_) {}
  explicit CeluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? x : T(alpha) * expm1Of(x / T(alpha));
  }
};
struct HardSigmoidOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha, beta;
  HardSigmoidOp(float alpha_, float beta_) : alpha(alpha_), beta(beta_) {}
  explicit HardSigmoidOp(const ir::AttributeMap& a)
      : alpha(a.getFloat("alpha", 0.2f)), beta(a.getFloat("beta", 0.5f)) {}
  template <class T>
  T operator()(T x) const {
    T y = T(alpha) * x + T(beta);
    y = y < T(0) ? T(0) : y;
    return y > T(1) ? T(1) : y;
  }
};
struct HardSwishOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T y = x * T(1.0 / 6) + T(0.5);
    y = y < T(0) ? T(0) : y;
    return x * (y > T(1) ? T(1) : y);
  }
};
struct ShrinkOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  float lambd, bias;
  explicit ShrinkOp(const ir::AttributeMap& a)
      : lambd(a.getFloat("lambd", 0.5f)), bias(a.getFloat("bias", 0.0f)) {}
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x < T(-lambd)) return x + T(bias);
      if (x > T(lambd)) return x - T(bias);
      return T(0);
    } else {
      const double v = double(x);
      if (v < -double(lambd)) return T(v + double(bias));
      if (v > double(lambd)) return T(v - double(bias));
      return T(0);
    }
  }
};

// Clip to [lo, hi]; lo > hi clips everything to hi, as ONNX specifies.
template <class T>
struct ClipOp {
  T lo, hi;
  T operator()(T v) const {
    T r = v < lo ? lo : v;
    return r > hi ? hi : r;
  }
};

}  // namespace partita::kernels::elementwise

// Float32 exp, tanh and erf written as straight-line arithmetic so that loops calling
// them vectorise (libm's calls do not without -ffast-math). Accuracy: within about
// 2 ulp of the correctly rounded result over the whole float range; NaN propagates,
// +-inf give the limits. Double precision keeps using libm.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace partita::kernels::elementwise {

inline float fastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  // Beyond these bounds the result is 0 or inf anyway; clamping keeps n in range.
  // NaN takes 0 here (the result is x itself, below), so n never converts a NaN to an
  // integer (undefined behaviour; UBSan found it through the fuzzer).
  const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : (x != x ? 0.0f : x));
  const float n = std::nearbyint(xc * kLog2e);
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  // Taylor polynomial of e^r to degree 7.
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n in two factors so that both stay normal for n in [-150, 128].
  const int32_t ni = int32_t(n);
  const int32_t n1 = ni >> 1;
  const float s1 = std::bit_cast<float>(uint32_t(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(uint32_t(ni - n1 + 127) << 23);
  const float y = p * s1 * s2;
  return x != x ? x : y;
}

// e^x - 1 without the cancellation of fastExp(x) - 1 near zero.
inline float fastExpm1(float x) {
  // Taylor series to degree 7 for |x| < 0.35 (error < 3e-8 relative).
  float p = 1.0f / 5040;
  p = p * x + 1.0f / 720;
  p = p * x + 1.0f / 120;
  p = p * x + 1.0f / 24;
  p = p * x + 1.0f / 6;
  p = p * x + 0.5f;
  p = p * x + 1.0f;
  const float small = p * x;
  return std::fabs(x) < 0.35f ? small : fastExp(x) - 1.0f;
}

inline float fastTanh(float x) {
  const float a = std::fabs(x);
  // Near zero 1 - 2 / (e^2a + 1) cancels; use the Taylor series there instead.
  const float z = a * a;
  float q = 21844.0f / 6081075;
  q = q * z - 1382.0f / 155925;
  q = q * z + 62.0f / 2835;
  q = q * z - 17.0f / 315;
  q = q * z + 2.0f / 15;
  q = q * z - 1.0f / 3;
  const float small = a + a * z * q;
  const float large = 1.0f - 2.0f / (fastExp(2.0f * a) + 1.0f);
  return std::copysign(a < 0.4f ? small : large, x);
}

inline float fastErf(float x) {
  const float a = std::fabs(x);
  const float z = a * a;
  // |x| < 1: Maclaurin series 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)).
  constexpr float kTerms[] = {1.0f,          -1.0f / 3,       1.0f / 10,       -1.0f / 42,
                              1.0f / 216,    -1.0f / 1320,    1.0f / 9360,     -1.0f / 75600,
                              1.0f / 685440, -1.0f / 6894720, 1.0f / 76204800, -1.0f / 918086400};
  float s = 0;
  for (int k = 11; k >= 0; --k) s = s * z + kTerms[k];
  const float small = 1.12837916709551257f * a * s;
  // |x| >= 1: Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, and erf >= 0.84 there).
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float large = 1.0f - p * t * fastExp(-z);
  return std::copysign(a < 1.0f ? small : large, x);
}

// Generic spellings: the fast float versions, libm for double.
template <class T>
inline T expOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastExp(x);
  else
    return std::exp(x);
}
template <class T>
inline T expm1Of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastExpm1(x);
  else
    return std::expm1(x);
}
template <class T>
inline T tanhOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastTanh(x);
  else
    return std::tanh(x);
}
template <class T>
inline T erfOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fastErf(x);
  else
    return std::erf(x);
}

}  // namespace partita::kernels::elementwise

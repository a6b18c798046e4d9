// Metal prelude for lazytensor's rendered kernels. MSL has no double: the wide type is float.
#include <metal_stdlib>
using namespace metal;
typedef long i64;
typedef ulong u64;
typedef uint u32;
typedef uchar u8;
typedef float real;
#define LT_FN static inline
#define LT_PRIV thread
LT_FN real lt_sqrt(real x) { return metal::precise::sqrt(x); }
LT_FN real lt_exp(real x) { return metal::precise::exp(x); }
LT_FN real lt_log(real x) { return metal::precise::log(x); }
LT_FN real lt_tanh(real x) { return metal::precise::tanh(x); }
LT_FN real lt_sin(real x) { return metal::precise::sin(x); }
LT_FN real lt_cos(real x) { return metal::precise::cos(x); }
LT_FN real lt_tan(real x) { return metal::precise::tan(x); }
LT_FN real lt_asin(real x) { return metal::precise::asin(x); }
LT_FN real lt_acos(real x) { return metal::precise::acos(x); }
LT_FN real lt_atan(real x) { return metal::precise::atan(x); }
LT_FN real lt_sinh(real x) { return metal::precise::sinh(x); }
LT_FN real lt_cosh(real x) { return metal::precise::cosh(x); }
LT_FN real lt_fabs(real x) { return metal::fabs(x); }
LT_FN real lt_floor(real x) { return metal::floor(x); }
LT_FN real lt_ceil(real x) { return metal::ceil(x); }
LT_FN real lt_copysign(real x, real y) { return metal::copysign(x, y); }
LT_FN bool lt_isnan(real x) { return x != x; }
LT_FN u64 lt_mul_wide(u32 a, u32 b) { return (u64)a * (u64)b; }

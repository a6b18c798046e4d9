/* C prelude: runs lazytensor's device kernel bodies on the CPU, to test them where no GPU is. */
#include <math.h>
#include <stdint.h>
#include <stdbool.h>
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;
#ifndef LT_REAL
#define LT_REAL double  /* float when emulating a float-only dialect (Metal) */
#endif
typedef LT_REAL real;
#define LT_FN static inline
#define LT_PRIV
LT_FN real lt_sqrt(real x) { return sqrt(x); }
LT_FN real lt_exp(real x) { return exp(x); }
LT_FN real lt_log(real x) { return log(x); }
LT_FN real lt_tanh(real x) { return tanh(x); }
LT_FN real lt_sin(real x) { return sin(x); }
LT_FN real lt_cos(real x) { return cos(x); }
LT_FN real lt_tan(real x) { return tan(x); }
LT_FN real lt_asin(real x) { return asin(x); }
LT_FN real lt_acos(real x) { return acos(x); }
LT_FN real lt_atan(real x) { return atan(x); }
LT_FN real lt_sinh(real x) { return sinh(x); }
LT_FN real lt_cosh(real x) { return cosh(x); }
LT_FN real lt_fabs(real x) { return fabs(x); }
LT_FN real lt_floor(real x) { return floor(x); }
LT_FN real lt_ceil(real x) { return ceil(x); }
LT_FN real lt_copysign(real x, real y) { return copysign(x, y); }
LT_FN int lt_isnan(real x) { return x != x; }
LT_FN u64 lt_mul_wide(u32 a, u32 b) { return (u64)a * (u64)b; }

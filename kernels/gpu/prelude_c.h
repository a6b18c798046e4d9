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
LT_FN int lt_isnan(real x) { return x != x; }
LT_FN u64 lt_mul_wide(u32 a, u32 b) { return (u64)a * (u64)b; }

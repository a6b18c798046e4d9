// CUDA prelude for lazytensor's rendered kernels (compiled by NVRTC: no headers available or needed).
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;
typedef double real;   // the wide type elementwise ops compute in before rounding at store
#define LT_FN __device__ static inline
#define LT_PRIV
LT_FN bool lt_isnan(real x) { return x != x; }
LT_FN u64 lt_mul_wide(u32 a, u32 b) { return (u64)a * (u64)b; }

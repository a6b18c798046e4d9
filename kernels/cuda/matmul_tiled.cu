// Register-tiled float32 matrix product for CUDA: y[z] = a[z] (N x K) @ b[z] (K x M), z over the
// batch (blockIdx.z). Each 256-thread block computes a 64 x 64 tile of y, each thread a 4 x 4 block of
// it, staging 16-wide slices of a and b in shared memory. FMA accumulation in float32: not
// bit-identical to BLAS (tolerance in docs/NUMERICS.md). Dollar-sign names are filled in by kernels/cuda/tiled.py.
#define LT_BM 64
#define LT_BN 64
#define LT_BK 16
extern "C" __global__ void __launch_bounds__(256) $NAME(float* __restrict__ y, const float* __restrict__ a,
                                                        const float* __restrict__ b) {
  __shared__ float As[LT_BK][LT_BM + 4];
  __shared__ float Bs[LT_BK][LT_BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const i64 z = blockIdx.z;
  const i64 a_base = $A_BASE;
  const i64 b_base = $B_BASE;
  const i64 y_base = z * (i64)$N * (i64)$M;
  const int row0 = blockIdx.y * LT_BM, col0 = blockIdx.x * LT_BN;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int t0 = 0; t0 < $K; t0 += LT_BK) {
    for (int l = threadIdx.x; l < LT_BM * LT_BK; l += 256) {
      const int r = l / LT_BK, c = l % LT_BK, gr = row0 + r, gc = t0 + c;
      As[c][r] = (gr < $N && gc < $K) ? a[a_base + (i64)gr * $K + gc] : 0.0f;
    }
    for (int l = threadIdx.x; l < LT_BK * LT_BN; l += 256) {
      const int r = l / LT_BN, c = l % LT_BN, gr = t0 + r, gc = col0 + c;
      Bs[r][c] = (gr < $K && gc < $M) ? b[b_base + (i64)gr * $M + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < LT_BK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < $N && c < $M) y[y_base + (i64)r * $M + c] = acc[i][j];
    }
}

"""The offload policy's thresholds, one table per kind of device (runtime/placement.py applies them).

The CUDA values are the measurements of the system this design comes from (NVIDIA GB10) and still
have to be re-measured on our own hardware; the virtual device uses the CUDA table so that its
transfer log rehearses a CUDA run. Metal's values are the seed's where it gives them; `fill` is not
measured for Metal and is scaled by its ~5x higher round trip.
"""

CUDA_THRESHOLDS = {
    "matmul": 131072,          # n*m*p (batch*n*m*p for stacked products), ~51^3
    "gemv": 131072,            # rows*cols of a matrix-vector product's matrix, once it is resident
    "transcendental": 16384,   # elements of exp/log/tanh/... and what is built on them
    "broadcast": 32768,        # result elements of broadcasting binary ops, expands, axis-list transposes
    "reduce_input": 131072,    # input elements of an axis reduction ...
    "reduce_slices": 256,      # ... and its number of output slices
    "fill": 8192,              # elements generated on the device (RNG fills, full/arange/linspace/eye)
}
# Metal takes no reduction under the policy (None): its float32 folds cannot give the float64 fold's
# bits, and the seed measured amax/amin there as a tie. Nothing is resident on Metal, so no operand
# ever makes one a member either; offload="always" still runs them (Kahan-compensated, docs/NUMERICS.md).
METAL_THRESHOLDS = {
    "matmul": 4194304, "gemv": 2097152, "transcendental": 131072, "broadcast": 262144,
    "reduce_input": None, "reduce_slices": None, "fill": 40960,
}

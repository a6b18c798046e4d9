"""Helpers shared by the CPU kernels: the one-piece `pieces` default and rounding to an array's dtype."""
import numba as nb


def one_piece(n, work_per_item=1):
    """The default `pieces(n, work_per_item)` of the kernels' entry points: None, the whole range(n) in
    one piece on this thread (the runtime passes one that returns piece bounds for its threads, an int64
    array 0 = b_0 < ... < b_k = n, when the work is worth splitting: runtime/parallel.py)."""
    return None


@nb.njit(cache=True, inline="always")
def rounded(value, cell):
    """`value` rounded to the dtype of `cell`, a one-element scratch array of that dtype."""
    cell[0] = value
    return cell[0]

"""Helpers shared by the CPU kernels: the one-piece `serial` split and rounding to an array's dtype."""
import numba as nb


def serial(fn, n, work_per_item=1):
    """The default `split(fn, n, work_per_item)` of the kernels' entry points: fn(0, n) on this thread
    (the runtime passes one that cuts range(n) into pieces for its threads)."""
    fn(0, n)


@nb.njit(cache=True, inline="always")
def rounded(value, cell):
    """`value` rounded to the dtype of `cell`, a one-element scratch array of that dtype."""
    cell[0] = value
    return cell[0]

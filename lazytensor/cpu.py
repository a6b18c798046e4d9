"""`lt.cpu`: the CPU's cache of kernel results, and `lt.cpu.amp.autocast` (bound by the package).

The CPU kernels take their large results from a cache of blocks they made before, so a loop that makes
and frees the same megabytes every step does not take them back from the operating system page by page.
Like MLX's `mx.clear_cache` / `mx.set_cache_limit`: `empty_cache()` frees the idle blocks,
`set_cache_limit(n)` keeps at most `n` idle bytes (LAZYTENSOR_HOST_CACHE sets it at the start),
`cache_stats()` says what it holds."""
from .runtime import host_malloc as _host_malloc
from .runtime.config import parse_bytes as _parse_bytes


def empty_cache():
    """Free every idle block of the CPU kernels' result cache (results still in use keep theirs)."""
    _host_malloc.empty_cache()


def set_cache_limit(limit):
    """Keep at most `limit` idle bytes (an int, or a size such as "512MB"; 0 keeps none) and free the
    idle blocks past it. Returns the previous limit."""
    return _host_malloc.set_cache_limit(_parse_bytes(limit))


def cache_stats():
    """{idle_bytes, leased_bytes (held by results in use), peak_bytes, cap_bytes, reuses, allocations}."""
    return _host_malloc.cache_stats()

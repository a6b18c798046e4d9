"""Moving one buffer across the host/device boundary, with its transfer record."""
from .residency import Buffer
from .transfers import LOG, now


def upload(buf, block, backend, reason="operand-upload"):
    """HOST -> BOTH: copy `buf`'s host array into `block` on `backend`."""
    start = now()
    if reason == "prefetch" and backend.copies_beside:  # on a copy stream: runtime/prefetch.py
        measured = backend.upload(block, buf.host, beside=True)
    else:
        measured = backend.upload(block, buf.host)
    buf.add_device_copy(block, backend)
    buf.home = None
    LOG.record("h2d", buf, reason, backend.name, start, measured if measured is not None else now() - start)


def upload_reason(buf, backend):
    """The transfer log's reason for uploading operand `buf` to `backend`: "re-home" for a value the
    evictor spilled from it (docs/RESIDENCY.md), else "operand-upload"."""
    return "re-home" if buf.home is backend else "operand-upload"


def make_resident(buf, backend, reason="operand-upload"):
    """Give `backend` a copy of `buf` (through the host if another device holds it); False if the
    memory cannot be had within the budget."""
    memory = backend.memory
    if buf.on_device and buf.backend is backend:
        memory.touch(buf)
        return True
    if buf.on_device:
        if not buf.on_host:
            download(buf, "device-switch")
        buf.backend.memory.forget(buf)
    block = memory.allocate(buf.nbytes)
    if block is None:
        return False
    upload(buf, block, backend, reason)
    memory.register(buf)
    return True


def download(buf, reason):
    """DEVICE -> BOTH: copy `buf`'s device value into a host array from the backend's pinned pool."""
    backend = buf.backend
    host = backend.pinned_pool.take(buf.shape, buf.dtype)
    start = now()
    measured = backend.download(buf.device, host)
    buf.add_host_copy(host)
    LOG.record("d2h", buf, reason, backend.name, start, measured if measured is not None else now() - start)


def exchange(buf, fn, label, transport, backend):
    """A new Buffer holding fn(`buf`'s host value), for a collective between processes (`fn` exchanges
    bytes with the other ranks): `buf` downloaded first when only a device has it (reason "collective"),
    the result uploaded to `backend` when given (reason "collective-result", where its readers run).
    While profiling, the exchange and upload are a kernel record `label` of backend `transport`."""
    if not buf.on_host:
        download(buf, "collective")
    start = now()
    array = fn(buf.host)
    result = Buffer.host_result(buf.node_id, label, array, True)
    if backend is not None:
        make_resident(result, backend, "collective-result")  # no room: it stays on the host
    if LOG.profiling:
        LOG.kernel_record(buf.node_id, label, transport, array.shape, str(array.dtype), start, now() - start)
    return result

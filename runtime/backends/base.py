"""The interface every executor implements."""


class Backend:
    """An executor: it accepts or declines each kernel, and runs the ones it accepts.

    Host backends (`is_host`) compute on host arrays directly; device backends own separate memory and
    implement alloc/free/upload/download/synchronize/mem_info as well.
    """

    name = "abstract"
    is_host = True

    def accepts(self, node, operands):
        """Whether this backend runs `node` given where its operand buffers live now."""
        raise NotImplementedError

    def launch(self, node, args):
        """Compute `node` from its operands' arrays on this backend; returns the result array."""
        raise NotImplementedError

    def synchronize(self):
        """Wait for queued work. Host backends run synchronously."""

    def mem_info(self):
        """(free, total) bytes of this backend's memory, or None for host memory."""
        return None

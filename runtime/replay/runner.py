"""The interface of the replay runners: a Program's steps, prepared once for where they run, replayed.

`host_runner.HostRunner` (every step on the host: prepared calls on arrays) and
`device_runner.DeviceRunner` (a device whose backend `prepares_launches`: driver launches over scratch)
both implement it; `capture.Program` uses one when its steps allow, else the executors.
"""


class Runner:
    """`replay(slots, stream0, execute, donors)` replays into `slots` (Buffers of the external values in,
    of the outputs out; random kernels draw from streams `stream0` + their offset; `execute(step,
    operands)` runs a step the generic way), writing replaced state over `donors` ({slot: old Buffer
    nobody else holds}) where it can. False (slots as they were) when it cannot run this time: the
    executors then run the steps. After it: `launched` (kernels run as prepared), `skipped` (steps
    it did not need to run), `updated` (donors written over); `can_update` says whether donors are
    worth finding at all."""

    launched = skipped = updated = 0
    can_update = False

    def replay(self, slots, stream0, execute, donors=None):
        raise NotImplementedError

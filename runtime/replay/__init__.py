"""The replay wing: what the engine ran once, run again on new values without planning it again.

One capture (`capture.Recorder`, told each kernel through the `capturing` context) makes a `Program` of
slots and steps; a runner replays it (`host_runner.HostRunner` on the CPU, `device_runner.DeviceRunner`
on a device that prepares launches), else the executors run its steps. Three callers decide when:
`lt.jit` (a decorated function), `repeats` (an undecorated eager realization on the CPU) and
lazytensor/backward_replay.py (a backward pass); they key their recordings by `signature`, keep them
in `cache.Bounded`, and refuse for the reasons `refusals` lists. A device runner is built once per
Program (`device_runner`) and runs each replay as a `device_replay.DeviceReplay`; op-specific rewrites
it may make (AdamW in place) are `passes` the op registry names.
"""

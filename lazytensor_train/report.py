"""The closing table of `lazytensor train`: what moved between host and device, what the program read,
where the values are, in one table with every number labelled."""
from lazytensor import counters, residency_stats

# What each host-read trigger of a training run is, for a reader who has not seen the code.
READS = {
    "item": "values read with .item() (logged losses)",
    "data": "batch offsets read to cut the text",
    "numpy": "arrays read with .numpy() (sampling)",
    "getitem": "elements read by indexing",
    "print": "tensors printed",
    "checkpoint": "tensors written to a checkpoint",
    "multinomial": "weights checked before sampling",
    "collective": "values exchanged between ranks",
}


def _row(label, training, whole, width=52):
    return f"  {label:<{width}} {training:>12,} {whole:>12,}"


def summary(prof, steps):
    """The table (a string): copies, evictions, operand hits and kernels during the training loop
    (`prof`, the loop's lt.profile) and over the whole run (every count since the process started:
    evaluation and sampling included), host reads by what they were, tensors by residency, device memory."""
    t, whole, seen = prof.stats, residency_stats(), counters()
    lines = [f"  {'transfers and kernels':<52} {f'{steps} steps':>12} {'whole run':>12}",
             _row("uploads (copies host -> device)", t["uploads"], whole["uploads"]),
             _row("  their bytes", t["upload_bytes"], whole["upload_bytes"]),
             _row("downloads (copies device -> host)", t["downloads"], whole["downloads"]),
             _row("  their bytes", t["download_bytes"], whole["download_bytes"]),
             _row("evictions (device copies spilled to the host)", t["evictions"], whole["evictions"]),
             _row("operands already on the device (hits)", t["operand_hits"], whole["operand_hits"]),
             _row("operands uploaded first (misses)", t["operand_misses"], whole["operand_misses"]),
             _row("kernels launched", t["kernels"], seen["kernels"])]
    by_reason = {}
    for (direction, reason, _), (count, nbytes, _) in prof.copies.items():
        entry = by_reason.setdefault(f"{'up' if direction == 'h2d' else 'down'}loads for {reason}", [0, 0])
        entry[0] += count
        entry[1] += nbytes
    for label, (count, nbytes) in sorted(by_reason.items()):
        lines.append(f"  {label:<52} {count:>12,} copies, {nbytes:,} bytes (training)")
    reads = seen["host_reads_by_trigger"]
    lines.append(f"  {'host reads (values the program looked at)':<52} {'':>12} {sum(reads.values()):>12,}")
    for trigger, n in sorted(reads.items()):
        lines.append(_row(f"  {READS.get(trigger, f'reads by {trigger}')}", t["host_reads"].get(trigger, 0), n))
    states = whole["tensors"]
    lines.append(f"  tensors alive now: {states['host']:,} on the host only, {states['device']:,} on a device only, "
                 f"{states['both']:,} on both, {states['pending']:,} not computed (nothing read them)")
    for name, d in whole["devices"].items():
        lines.append(f"  device {name}: peak {d['peak_bytes'] / 2 ** 20:,.1f} MiB resident, "
                     f"{d['bytes_resident'] / 2 ** 20:,.1f} MiB now, budget {d['budget'] / 2 ** 20:,.1f} MiB, "
                     f"{d['memory_fallbacks']:,} kernels run elsewhere for lack of memory")
    return "\n".join(lines)


def modeled(step_profile, median_step_ms):
    """Lines on the one step profiled for a modeled timeline: its time on the device profile beside the
    run's measured median step here."""
    lines = [f"one training step modeled (with lt.profile(model=...); the median step measured here: "
             f"{median_step_ms:.1f} ms):"]
    lines += ["  " + line for line in step_profile.modeled(step_profile.model).lines()]
    return "\n".join(lines)

"""The machine a bench figure was measured on, for the tables the bench scripts write.

``describe() -> dict``: CPU model, logical cores, bertkit's CPU class (``bertkit.cpu.cpu_class``:
what ``auto`` decides from; ``BERTKIT_CPU_CLASS`` if set), whether the CPU has native bf16
(``avx512_bf16`` / ``amx_bf16`` / Arm ``bf16``; elsewhere bf16 autocast is emulated) with
bertkit's own reason, AVX-512 yes/no, the GPU where torch sees one (a run on a lent GPU machine
would otherwise be described by its host CPU alone), torch version, the load average when asked. Native
bf16 is bertkit's decision (the one ``--precision auto`` uses), not re-derived here.
``markdown(info) -> str``: the same as a few markdown lines.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _bf16():
    """bertkit's answer to "does this CPU compute bf16 natively"."""
    from bertkit.cpu import cpu_bf16_support

    return cpu_bf16_support()


def _cpuinfo() -> tuple[str, set[str]]:
    """(model name, flags) of the first processor in /proc/cpuinfo; ("unknown", set()) if none
    (the flags read by bertkit's own :func:`bertkit.cpu.cpu_flags`)."""
    from bertkit.cpu import cpu_flags

    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown", set()
    model = next((line.partition(":")[2].strip() for line in text.splitlines()
                  if line.partition(":")[0].strip().lower() == "model name"), "unknown")
    return model, cpu_flags(text)


def _gpu() -> str | None:
    """The first CUDA device's name and memory, or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return f"{props.name}, {props.total_memory / 2**30:.0f} GiB"


def describe() -> dict:
    """The machine: cpu, cores, CPU class, native bf16 (and why), avx512, gpu, torch version, load average."""
    import torch

    from bertkit.cpu import cpu_class, cpu_has_vnni

    model, flags = _cpuinfo()
    bf16 = _bf16()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "cpu_class": cpu_class(),
        "vnni": cpu_has_vnni(),
        "native_bf16": bf16.native,
        "bf16_reason": bf16.reason,
        "avx512_bf16": "avx512_bf16" in flags,
        "avx512f": "avx512f" in flags,
        "gpu": _gpu(),
        "torch": torch.__version__,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def markdown(info: dict) -> str:
    """``info`` (from :func:`describe`) as markdown bullet lines."""
    load = info.get("load_average")
    # a record appended by --append carries its time; one described on the spot has none
    when = f"at {info['time']}" if info.get("time") else "when the table was written"
    return "\n".join([
        f"- CPU: {info['cpu']}, {info['cores']} logical cores, CPU class {info.get('cpu_class')}; avx512f "
        f"{'yes' if info['avx512f'] else 'no'}, avx512_bf16 {'yes' if info['avx512_bf16'] else 'no'}",
        f"- bf16: {'native' if info['native_bf16'] else 'emulated or absent'} "
        f"({info['bf16_reason']})",
        *([f"- GPU: {info['gpu']}"] if info.get("gpu") else []),
        f"- torch {info['torch']}" + (f"; load average {when}: "
                                      f"{', '.join(f'{x:.2f}' for x in load)}" if load else ""),
    ])


def line(info: dict) -> str:
    """``info`` (from :func:`describe`) as one line, for a benchmark's output."""
    return (f"machine: {info['cpu']}, {info['cores']} logical CPUs, CPU class {info.get('cpu_class')}, "
            f"VNNI {'yes' if info.get('vnni') else 'no'}, native bf16 {'yes' if info['native_bf16'] else 'no'}, "
            f"torch {info['torch']}")


def main(argv=None) -> int:
    """``python bench/machine.py [--append FILE.jsonl] [--note TEXT]``: print the machine as
    JSON, or append it (with the time and the note) to a JSON Lines file."""
    import argparse
    import json
    import time

    p = argparse.ArgumentParser(description="Describe this machine (CPU, native bf16, torch).")
    p.add_argument("--append", type=Path, help="append one JSON line to this file")
    p.add_argument("--note", default="", help="what ran (stored with the line)")
    args = p.parse_args(argv)
    info = dict(describe(), time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), note=args.note)
    line = json.dumps(info)
    if args.append:
        args.append.parent.mkdir(parents=True, exist_ok=True)
        with open(args.append, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    else:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Sizes, per kernel of a SASS dump, the code before its PDL wait (ACQBULK, griddepcontrol.wait):
the static instructions from the entry to the first wait, and among them the async copies (cp.async
LDGSTS, bulk and tensor copies UBLKCP / UTMALDG, their prefetches), the constant loads (LDC /
ULDC: parameters, a cache miss each the first time a launch reads a line) and the reciprocals that
mark an integer division by a runtime value (MUFU.RCP). A block that enters only once the kernel
before has left runs all of it on the launch's chain. Qwen2.5-0.5B's down (the deep-ring variant)
has 893 instructions before its wait and its o 430; on an H100 their trace builds took 0.94 and
0.65 us from a block's entry to its weight copies issued, and down's last block entered 0.16 us
after the previous launch's last exit (bench/results/2026-12-06-push-merge/run3_abtrace.txt).
Static counts in program order, not along control flow: a guide, not a proof.
  .tools/cuda/bin/cuobjdump -sass K.cubin > K.sass   (scripts/gpu/get_sass_tools.sh)
  python3 scripts/gpu/prologue.py K.sass [--kernel TEXT]
"""
import re
import sys

COPIES = ("LDGSTS", "UBLKCP", "UTMALDG", "UTMAPF", "UBLKPF")


def kernels(text):
    """(name, [instruction text]) for each 'Function :' section of a cuobjdump -sass listing."""
    out = []
    for body in text.split("Function : ")[1:]:
        name = body.split("\n", 1)[0].strip()
        out.append((name, re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", body, re.M)))
    return out


def before_wait(ops):
    """The counts of the code before the first PDL wait, or None for a kernel without one."""
    wait = next((i for i, op in enumerate(ops) if op.split(" ", 1)[0] == "ACQBULK"), None)
    if wait is None:
        return None
    opcodes = [re.sub(r"^@!?U?P\w+\s+", "", op).split(" ", 1)[0] for op in ops[:wait]]
    base = [op.split(".")[0] for op in opcodes]
    return {
        "instructions": wait,
        "copies": sum(b in COPIES for b in base),
        "constants": sum(b in ("LDC", "ULDC") for b in base),
        "divisions": sum(op.startswith("MUFU.RCP") for op in opcodes),
    }


def main():
    args = sys.argv[1:]
    kernel = None
    if len(args) == 3 and args[1] == "--kernel":
        kernel = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit("usage: prologue.py FILE.sass [--kernel TEXT]")
    with open(args[0]) as f:
        found = kernels(f.read())
    if not found:
        sys.exit("prologue.py: no 'Function :' sections in " + args[0])
    shown = [(name, ops) for name, ops in found if kernel is None or kernel in name]
    if not shown:
        sys.exit(f"prologue.py: no kernel name contains '{kernel}'")
    for name, ops in shown:
        c = before_wait(ops)
        if c is None:
            print(f"{name}\n  no PDL wait")
        else:
            print(f"{name}\n  before the wait: {c['instructions']} instructions, {c['copies']} async "
                  f"copies, {c['constants']} constant loads, {c['divisions']} reciprocals")


if __name__ == "__main__":
    main()

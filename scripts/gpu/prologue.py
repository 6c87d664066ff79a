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


def main():
    args = sys.argv[1:]
    kernel = None
    if len(args) == 3 and args[1] == "--kernel":
        kernel = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit("usage: prologue.py FILE.sass [--kernel TEXT]")
    with open(args[0]) as f:
        functions = f.read().split("Function : ")[1:]
    if not functions:
        sys.exit("prologue.py: no 'Function :' sections in " + args[0])
    shown = 0
    for body in functions:
        name = body.split("\n", 1)[0].strip()
        if kernel is not None and kernel not in name:
            continue
        ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", body, re.M)
        wait = next((i for i, op in enumerate(ops) if "ACQBULK" in op), None)
        shown += 1
        if wait is None:
            print(f"{name}\n  no PDL wait")
            continue
        before = [re.sub(r"^@!?U?P\w+\s+", "", op) for op in ops[:wait]]
        copies = sum(op.split(" ", 1)[0].split(".")[0] in COPIES for op in before)
        constants = sum(op.split(" ", 1)[0].split(".")[0] in ("LDC", "ULDC") for op in before)
        divisions = sum(op.startswith("MUFU.RCP ") for op in before)
        print(f"{name}\n  before the wait: {wait} instructions, {copies} async copies, "
              f"{constants} constant loads, {divisions} reciprocals")
    if shown == 0:
        sys.exit(f"prologue.py: no kernel name contains '{kernel}'")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Lists, per kernel of a SASS dump, the 64-byte lines of its parameter block (constant bank 0 from
0x210) that the code first reads after its PDL wait (ACQBULK, griddepcontrol.wait) without having
read them before it. Each such line is a constant-cache miss after the wait, on the launch's chain;
cuda::touch_params (ops/common/cuda_launch.cuh) before the wait removes them. Reads in program
order, not along control flow: a guide, not a proof.
  .tools/cuda/bin/cuobjdump -sass K.cubin > K.sass   (scripts/gpu/get_sass_tools.sh)
  python3 scripts/gpu/param_lines.py K.sass
"""
import re
import sys

PARAMS_START = 0x210  # sm_90: the driver's words below, the kernel's parameters from here
LINE = 64


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: param_lines.py FILE.sass")
    with open(sys.argv[1]) as f:
        functions = f.read().split("Function : ")[1:]
    if not functions:
        sys.exit("param_lines.py: no 'Function :' sections in " + sys.argv[1])
    for body in functions:
        name = body.split("\n", 1)[0].strip()
        before, after, waited = set(), {}, False
        for line in body.split("\n"):
            m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
            if not m:
                continue
            if "ACQBULK" in m.group(2):
                waited = True
            for offset in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+)\]", m.group(2)):
                o = int(offset, 16)
                if o < PARAMS_START:
                    continue
                if waited:
                    after.setdefault(o, m.group(1))
                else:
                    before.add(o)
        if not waited:
            continue
        warm = {o // LINE for o in before}
        cold = sorted(o for o in after if o // LINE not in warm)
        lines = sorted({o // LINE * LINE for o in cold})
        verdict = ("none" if not cold else ", ".join(hex(l) for l in lines) + " (first reads: " +
                   ", ".join(f"{hex(o)} at {after[o]}" for o in cold[:6]) + ")")
        print(f"{name}\n  lines first read after the wait: {verdict}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What the compiler made of a kernel's loops, from its SASS (no GPU needed).

    scripts/gpu/sass_loops.py FILE [--kernel TEXT] [--all]     each kernel's loops
    scripts/gpu/sass_loops.py --same FILE_A FILE_B     do two builds hold the same instructions?

FILE is an object or executable with sm_90a code (nvcc -c ... -o x.o, or a built binary). A loop is
a backward branch; for each one the table gives its first address, its instructions, and how many
of them are global loads (LDG), async copies into shared memory (LDGSTS), shared loads (LDS),
spills and their reloads (STL / LDL), rebuilds of the shared window's base (S2UR ... SR_CgaCtaId,
the trap bench/results/2026-12-02-sampling-pass-one-addresses.md found costing a streaming loop
6-10 %) and barriers (BAR). Loops are listed innermost first (the shortest loop at each place);
only those that touch global or local memory unless --all.

--same compares the two files' instructions kernel by kernel, addresses and the per-file hash in
kernel names left out: "same" means a change (a comment, a refactor) left the code as it was.

Needs cuobjdump and nvdisasm: on PATH, in $CUDA_HOME/bin, or in .tools/cuda/bin (put there by
scripts/gpu/get_sass_tools.sh, from PyPI, where the CUDA toolkit lacks them).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSTR_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(?:/\*.*)?$")
BRANCH_RE = re.compile(r"\bBRA\b(?:\.[A-Z.]+)?\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)")
# The per-translation-unit hash nvcc puts in the names of kernels in anonymous namespaces.
# Mangled, it is one identifier with its length first: 49_GLOBAL__N__4f5ca673_16_sampling_cuda_cu_233b343c.
NAME_HASH_RE = re.compile(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_[A-Za-z0-9_]+?_cu_[0-9a-f]{8}")

COUNTED = [
    ("LDG", re.compile(r"\bLDG\b")),
    ("LDGSTS", re.compile(r"\bLDGSTS\b")),
    ("LDS", re.compile(r"\bLDS\b")),
    ("STL", re.compile(r"\bSTL\b")),
    ("LDL", re.compile(r"\bLDL\b")),
    ("S2UR", re.compile(r"\bS2UR\b.*SR_CgaCtaId")),
    ("BAR", re.compile(r"\bBAR\b")),
]


def parse_sass(text):
    """{kernel: [(address, instruction text)]} from `cuobjdump -sass` output."""
    kernels = {}
    current = None
    for line in text.splitlines():
        m = FUNCTION_RE.match(line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = INSTR_RE.match(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2)))
    return kernels


def loops(instructions):
    """The kernel's loops, innermost first: dicts of start address, size and counts."""
    index = {address: i for i, (address, _) in enumerate(instructions)}
    found = {}
    for i, (address, text) in enumerate(instructions):
        m = BRANCH_RE.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target > address or target not in index:
            continue
        body = [t for _, t in instructions[index[target]:i + 1]]
        loop = {"start": target, "end": address, "size": len(body)}
        for name, pattern in COUNTED:
            loop[name] = sum(1 for t in body if pattern.search(t))
        # Several branches back to one place: keep the shortest body (the loop itself).
        if target not in found or found[target]["size"] > loop["size"]:
            found[target] = loop
    return sorted(found.values(), key=lambda l: (l["size"], l["start"]))


def normalised(kernels):
    """Instruction texts per kernel, kernel names without nvcc's per-file hash."""
    return {NAME_HASH_RE.sub("(anonymous)", name): [t for _, t in instrs]
            for name, instrs in kernels.items()}


def compare(a, b):
    """Lines saying how the kernels of two parsed files differ; empty when they hold the same."""
    na, nb = normalised(a), normalised(b)
    out = []
    for name in sorted(set(na) | set(nb)):
        if name not in na or name not in nb:
            out.append("only in %s: %s" % ("A" if name in na else "B", name))
        elif na[name] != nb[name]:
            differ = sum(1 for x, y in zip(na[name], nb[name]) if x != y)
            differ += abs(len(na[name]) - len(nb[name]))
            out.append("differs: %s (%d vs %d instructions, %d positions differ)" %
                       (name, len(na[name]), len(nb[name]), differ))
    return out


def find_tool(name):
    for candidate in (shutil.which(name),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", name),
                      os.path.join(ROOT, ".tools", "cuda", "bin", name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def sass_of(path):
    if not os.path.isfile(path):
        sys.exit("sass_loops: %s: no such file" % path)
    cuobjdump = find_tool("cuobjdump")
    nvdisasm = find_tool("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        sys.exit("sass_loops: needs cuobjdump and nvdisasm (on PATH, in $CUDA_HOME/bin or in "
                 ".tools/cuda/bin): run scripts/gpu/get_sass_tools.sh")
    env = dict(os.environ, PATH=os.path.dirname(nvdisasm) + os.pathsep + os.environ.get("PATH", ""))
    run = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit("sass_loops: cuobjdump -sass %s failed: %s" % (path, run.stderr.strip()))
    kernels = parse_sass(run.stdout)
    if not kernels:
        sys.exit("sass_loops: %s holds no device code (build it for sm_90a)" % path)
    return kernels


def report(kernels, kernel_filter, show_all=False):
    lines = []
    names = [n for n in kernels if kernel_filter is None or kernel_filter in n]
    if not names:
        return ["no kernel name contains %r" % kernel_filter]
    header = "  %-8s %6s" % ("start", "instrs") + "".join(" %6s" % n for n, _ in COUNTED)
    for name in names:
        every = loops(kernels[name])
        found = [l for l in every
                 if show_all or l["LDG"] or l["LDGSTS"] or l["STL"] or l["LDL"]]
        lines.append("%s: %d instructions, %d loops (%d shown)" %
                     (name, len(kernels[name]), len(every), len(found)))
        if found:
            lines.append(header)
        for l in found:
            lines.append("  %-8s %6d" % (hex(l["start"]), l["size"]) +
                         "".join(" %6d" % l[n] for n, _ in COUNTED))
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--kernel", help="only kernels whose (mangled) name contains this text")
    parser.add_argument("--all", action="store_true",
                        help="every loop, not only those that touch global or local memory")
    parser.add_argument("--same", action="store_true", help="compare two files' instructions")
    args = parser.parse_args(argv)
    if args.same:
        if len(args.files) != 2:
            parser.error("--same takes exactly two files")
        diff = compare(sass_of(args.files[0]), sass_of(args.files[1]))
        print("\n".join(diff) if diff else "same instructions in every kernel")
        return 1 if diff else 0
    if len(args.files) != 1:
        parser.error("one FILE (or --same FILE_A FILE_B)")
    print("\n".join(report(sass_of(args.files[0]), args.kernel, args.all)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

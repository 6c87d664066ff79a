#!/usr/bin/env python3
"""Prints the hottest SASS instructions of an Nsight Compute source page (CSV from
`ncu --import R --page source --print-source sass --csv`): the rows with the most warp-stall
samples, with their stall-reason columns, so one device run says where a kernel waits.
  python3 scripts/gpu/ncu_hot.py SOURCE.csv [ROWS]
"""
import csv
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: ncu_hot.py SOURCE.csv [ROWS]")
    rows_wanted = int(sys.argv[2]) if len(sys.argv) == 3 else 60
    with open(sys.argv[1], newline="") as f:
        lines = [line for line in f if line.startswith('"') or line.startswith("#")]
    table = list(csv.reader(lines))
    if not table:
        sys.exit("ncu_hot.py: no CSV rows in " + sys.argv[1])
    # The page starts with kernel-name lines; the header is the first row naming the samples.
    start = next((n for n, row in enumerate(table)
                  if any(h.startswith("Warp Stall Sampling (All") for h in row)), None)
    if start is None:
        sys.exit("ncu_hot.py: no 'Warp Stall Sampling (All Samples)' column in " + sys.argv[1] +
                 "; first rows: " + repr(table[:3]))
    header, body = table[start], table[start + 1:]
    samples = next(i for i, h in enumerate(header) if h.startswith("Warp Stall Sampling (All"))
    executed = next((i for i, h in enumerate(header) if h.startswith("Instructions Executed")), None)

    def number(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0

    total = sum(number(r[samples]) for r in body if len(r) > samples) or 1.0
    source = next((i for i, h in enumerate(header) if h == "Source"), 1)
    # Stall columns: those named stall_* or containing "Stall" besides the two totals, non-zero anywhere.
    stall_cols = [i for i, h in enumerate(header)
                  if i != samples and ("stall" in h.lower()) and "Not-issued" not in h]
    print("total stall samples", int(total))
    hot = sorted((r for r in body if len(r) > samples), key=lambda r: -number(r[samples]))[:rows_wanted]
    for r in hot:
        reasons = sorted(((number(r[i]), header[i]) for i in stall_cols if number(r[i]) > 0), reverse=True)[:3]
        count = int(number(r[executed])) if executed is not None else 0
        print(f"{100 * number(r[samples]) / total:5.1f}%  {r[0]:>6}  {count:>10}  {r[source][:60]:60}  " +
              ", ".join(f"{name.replace('Warp Stall Sampling', '').strip()}={int(v)}" for v, name in reasons))


if __name__ == "__main__":
    main()

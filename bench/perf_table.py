#!/usr/bin/env python3
"""Turns one device run's qattn-bench JSON and torch_baseline.py JSON into the
markdown tables of docs/perf.md (ratios computed from the same run).
Usage: perf_table.py BENCH_JSON TORCH_JSON"""
import json
import sys


def main():
    bench = json.load(open(sys.argv[1]))["results"]
    torch = json.load(open(sys.argv[2]))
    copy_gbps = torch["copy"]["GBps"]
    sdpa = {r["name"]: r for r in torch["decode"]}
    tmqa = {r["name"]: r for r in torch["mqa"]}
    mm = torch["matmul"]["TFLOPs"]
    print(f"Device: {torch['device']}; copy bandwidth in this run {copy_gbps:.0f} GB/s; "
          f"f16 matmul {mm:.0f} TFLOP/s (torch {torch['torch']}).\n")
    print("| preset | variant | splits | median us (min-max) | GB/s | % of copy | SDPA bf16 us | speed-up | check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in bench:
        if r["op"] != "decode":
            continue
        gbs = r["bytes"] / (r["median_us"] * 1e3) if r["median_us"] else 0
        s = sdpa.get(r["preset"])
        sd = f"{s['median_us']:.1f}" if s else "-"
        sp = f"{s['median_us'] / r['median_us']:.2f}x" if s and r["median_us"] else "-"
        print(f"| {r['preset']} | {r['variant']} | {r['splits']} | {r['median_us']:.2f} "
              f"({r['min_us']:.2f}-{r['max_us']:.2f}) | {gbs:.0f} | {100 * gbs / copy_gbps:.0f}% | {sd} | {sp} | "
              f"{'matched' if r['verified'] else 'MISMATCH'} |")
    print()
    print("| preset | variant | slices | median us (min-max) | TFLOP/s | % of f16 matmul | torch fp8 TFLOP/s | speed-up | check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in bench:
        if r["op"] != "mqa_logits":
            continue
        tf = r["flops"] / (r["median_us"] * 1e6) if r["median_us"] else 0
        t = tmqa.get(r["preset"])
        tt = f"{t['TFLOPs']:.1f}" if t else "-"
        sp = f"{t['median_us'] / r['median_us']:.1f}x" if t and r["median_us"] else "-"
        print(f"| {r['preset']} | {r['variant']} | {r['splits']} | {r['median_us']:.1f} "
              f"({r['min_us']:.1f}-{r['max_us']:.1f}) | {tf:.1f} | {100 * tf / mm:.0f}% | {tt} | {sp} | "
              f"{'matched' if r['verified'] else 'MISMATCH'} |")


if __name__ == "__main__":
    main()

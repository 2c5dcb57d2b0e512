#!/usr/bin/env python3
"""Turns one device run's qattn-bench JSON and torch_baseline.py JSON into the
markdown tables of docs/perf.md (every ratio from numbers of the same run).

Usage: perf_table.py BENCH_JSON [TORCH_JSON]
       perf_table.py BENCH_JSON [TORCH_JSON] --plot OUT.png [--hip HIP_BENCH_JSON] [--title T]

--plot draws the run instead (matplotlib; Debian's python3-matplotlib, which
the tool root has): per decode preset, qattn (and the HIP twin with --hip),
torch SDPA over a bf16 cache and the best peer figure as bars of time, the
memory floor (the bytes the decode must move / the copy rate, else the read
bandwidth) marked on each; per MQA preset, TFLOP/s against torch and the bar.

The decode table holds each preset against its ceilings: the read bandwidth
qattn-bench measured through the same backend at its start, the time of
qattn_decode_read over the same call (decode's own access pattern: the same
bytes through the same page table, nothing else; "-" where it did not run or
its sum did not match), and the copy rate torch measured (floor = the bytes the decode must move / the copy rate), next
to torch SDPA over a bf16 cache of the same shape (CUDA-graph replay) and the
bar issue 25 sets for the preset. Without TORCH_JSON the torch columns read "-".

The bytes come from the bench JSON and are recomputed here from the shape it
records (decode_bytes, the twin of bench_decode_bytes in bench/presets.c); a
file where the two differ is refused, so the table and the bench cannot
count differently.
"""
import json
import sys

# Issue 25, "Done when" (H200, Vulkan backend, qattn-bench medians, same run
# as torch_baseline.py timing CUDA-graph replays): "us" a time bar, "copy" a
# share of the copy rate in %, "vs" at most a factor times another preset's
# time. Every decode preset also has to beat torch SDPA (graph replay) of the
# same run and the fastest peer figure (PEERS below, from docs/anchors.md).
TARGETS = {
    "decode_b16_gqa4_32k": {"us": 350},
    "decode_b16_gqa8_32k": {"us": 185},
    "decode_b1_gqa4_32k": {"us": 45},
    "decode_b1_gqa8_32k": {"us": 30},
    "decode_b1_gqa4_8k": {"us": 18},
    "decode_b1_gqa8_8k": {"us": 18},
    "decode_b16_gqa4_32k_int8": {"copy": 70},
    "decode_b16_gqa4_32k_bf16": {"copy": 70},
    "decode_b16_gqa4_32k_r4": {"vs": ("decode_b16_gqa4_32k", 1.3)},
    "decode_b16_gqa4_32k_d64": {"copy": 60},
    "decode_b16_gqa4_32k_d256": {"copy": 60},
}
# Issue 10, "Done when" (H200, Vulkan, qattn-bench medians): TFLOP/s bars,
# each above the aiter Triton figure of docs/anchors.md.
MQA_TARGETS = {
    "mqa_2048x65536_h64": 340,
    "mqa_1024x131072_h64": 330,
    "mqa_4096x32768_h64": 340,
    "mqa_1024x131072_h32": 210,
}
# The HIP backend's bar, measured on its NVIDIA twin: an NVIDIA number about
# the HIP code, not an AMD one.
HIP_TARGETS = {
    "decode_b16_gqa4_32k": {"copy": 60},
}
# The fastest peer figure per preset in docs/anchors.md (vLLM Triton,
# SGLang Triton, ggml Vulkan FA q8_0 and f16; H200, 2026-12-01), in us.
PEERS = {
    "decode_b1_gqa4_8k": 41.3,
    "decode_b1_gqa8_8k": 33.8,
    "decode_b1_gqa4_32k": 90.2,
    "decode_b1_gqa8_32k": 63.9,
    "decode_b16_gqa4_32k": 546,
    "decode_b16_gqa8_32k": 284,
}

CODE_BYTES = {"bf16": 2, "i8": 1, "fp8_e4m3fn": 1, "fp8_e4m3fnuz": 1, "fp8_e5m2": 1}


def decode_bytes(s):
    """K and V codes and their f32 scales of every key some row sees, once;
    q read and o written once (bf16 or f16: 2 bytes). Twin of bench_decode_bytes."""
    scales = 0 if s["dtype"] == "bf16" else 8
    visible = s["keys"]
    if s.get("window", 0) > 0 and s["window"] + s["R"] < s["keys"]:
        visible = s["window"] + s["R"]
    qo = 4 * s["B"] * s["R"] * s["Hq"] * s["D"]
    return s["B"] * visible * s["Hkv"] * (2 * s["D"] * CODE_BYTES[s["dtype"]] + scales) + qo


def gbps(bytes_, us):
    return bytes_ / (us * 1e3) if us else 0.0


def check_bytes(results):
    for r in results:
        if r["op"] != "decode" or "shape" not in r or r.get("error"):
            continue
        want = decode_bytes(r["shape"])
        if abs(want - r["bytes"]) > 0.5:
            sys.exit(f"perf_table: {r['preset']}: the bench counted {r['bytes']:.0f} bytes, "
                     f"decode_bytes gives {want:.0f}; bench/presets.c and bench/perf_table.py disagree")


def verdict(r, by_name, copy, sdpa):
    """(target text, met text) for decode result r."""
    hip = r["backend"] == "hip"
    t = (HIP_TARGETS if hip else TARGETS).get(r["preset"], {})
    us = r["median_us"]
    conds = []  # (text, met: True/False/None when it cannot be judged here)
    if "us" in t:
        conds.append((f"<= {t['us']} us", us <= t["us"]))
    if "copy" in t:
        share = 100 * gbps(r["bytes"], us) / copy if copy else None
        conds.append((f">= {t['copy']}% copy", None if share is None else share >= t["copy"]))
    if "vs" in t:
        other, factor = t["vs"]
        o = by_name.get(other)
        conds.append((f"<= {factor}x {other}", None if not o else us <= factor * o["median_us"]))
    if not hip:
        if r["preset"] in PEERS:
            conds.append((f"< peers ({PEERS[r['preset']]})", us < PEERS[r["preset"]]))
        conds.append(("< SDPA", None if sdpa is None else us < sdpa))
    if not conds:
        return "-", "-"
    text = "; ".join(c for c, _ in conds)
    if not r["verified"]:
        return text, "NO (output mismatched)"
    missed = [c for c, m in conds if m is False]
    unknown = [c for c, m in conds if m is None]
    if missed:
        return text, "NO (" + "; ".join(missed) + ")"
    if unknown:
        return text, "open (" + "; ".join(unknown) + ": not measured)"
    return text, "yes"


def plot(bench, torch, out, hip=None, title=None):
    """The run as a PNG: decode presets' times as bars, floors marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in bench["results"] if not r.get("error")]
    check_bytes(results)
    copy = torch["copy"]["GBps"] if torch else 0
    read = bench.get("read_bandwidth", {})
    read_gbps = read.get("GBps", 0) if read.get("verified") else 0
    floor_gbps, floor_what = (copy, "copy rate") if copy else (read_gbps, "read bandwidth")
    sdpa = {r["name"]: r["median_us"] for r in torch["decode"]} if torch else {}
    hipr = {r["preset"]: r for r in hip["results"] if not r.get("error")} if hip else {}
    decode = [r for r in results if r["op"] == "decode"]
    mqa = [r for r in results if r["op"] == "mqa_logits"]
    panels = [p for p in (decode, mqa) if p]
    if not panels:
        sys.exit("perf_table: nothing to plot in this JSON")
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 5.2 * len(panels)), squeeze=False)
    backend = decode[0]["backend"] if decode else results[0]["backend"]
    dev = results[0]["device"]
    if decode:
        ax = axes[0][0]
        series = [("qattn (%s)" % backend, [r["median_us"] for r in decode], "#1f77b4")]
        if hipr:
            series.append(("qattn (HIP on NVIDIA)",
                           [hipr[r["preset"]]["median_us"] if r["preset"] in hipr else 0
                            for r in decode], "#17becf"))
        if sdpa:
            series.append(("torch SDPA, bf16 cache", [sdpa.get(r["preset"], 0) for r in decode],
                           "#ff7f0e"))
        if any(r["preset"] in PEERS for r in decode):
            series.append(("best peer (anchors.md)", [PEERS.get(r["preset"], 0) for r in decode],
                           "#7f7f7f"))
        n, w = len(series), 0.8 / len(series)
        for i, (label, ys, color) in enumerate(series):
            xs = [j + (i - (n - 1) / 2) * w for j in range(len(decode))]
            bars = ax.bar([x for x, y in zip(xs, ys) if y], [y for y in ys if y], w, label=label,
                          color=color)
            for b in bars:
                ax.annotate("%.0f" % b.get_height(), (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=6, rotation=90)
        if floor_gbps:
            for j, r in enumerate(decode):
                f = r["bytes"] / (floor_gbps * 1e3)
                ax.hlines(f, j - 0.45, j + 0.45, colors="black", linestyles="--", linewidth=1.2,
                          label="memory floor of qattn's cache format (its bytes / %s %.0f GB/s)" % (floor_what, floor_gbps)
                          if j == 0 else None)
        ax.set_yscale("log")
        ax.set_ylabel("decode time, us (log; lower is better)")
        ax.set_xticks(range(len(decode)))
        ax.set_xticklabels([r["preset"].replace("decode_", "") for r in decode], rotation=25,
                           ha="right", fontsize=8)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.set_title(("%s: decode" % title) if title else "decode on %s: qattn-bench medians, %s" % (
            dev, "torch %s same run" % torch["torch"] if torch else "no torch baseline"),
            fontsize=10)
    if mqa:
        ax = axes[len(panels) - 1][0]
        tm = {r["name"]: r for r in torch["mqa"]} if torch else {}
        tf = [r["flops"] / (r["median_us"] * 1e6) for r in mqa]
        tt = [tm[r["preset"]]["TFLOPs"] if r["preset"] in tm else 0 for r in mqa]
        xs = range(len(mqa))
        ax.bar([x - 0.2 for x in xs], tf, 0.4, label="qattn (%s)" % mqa[0]["backend"],
               color="#1f77b4")
        if any(tt):
            ax.bar([x + 0.2 for x, y in zip(xs, tt) if y], [y for y in tt if y], 0.4,
                   label="torch fp8", color="#ff7f0e")
        for j, r in enumerate(mqa):
            if r["preset"] in MQA_TARGETS:
                ax.hlines(MQA_TARGETS[r["preset"]], j - 0.45, j + 0.45, colors="red",
                          linestyles=":", label="bar (issue 10)" if j == 0 else None)
            if r.get("ceiling_tflops"):
                ax.hlines(r["ceiling_tflops"], j - 0.45, j + 0.45, colors="black",
                          linestyles="--", label="matrix ceiling" if j == 0 else None)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["preset"] for r in mqa], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("TFLOP/s (higher is better)")
        ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
        ax.set_title(("%s: MQA logits" % title) if title else "MQA logits on %s" % dev,
                     fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("perf_table: wrote %s" % out)


def main():
    if "--plot" in sys.argv:
        import argparse
        ap = argparse.ArgumentParser(usage=__doc__)
        ap.add_argument("bench")
        ap.add_argument("torch", nargs="?")
        ap.add_argument("--plot", required=True)
        ap.add_argument("--hip")
        ap.add_argument("--title")
        a = ap.parse_args()
        plot(json.load(open(a.bench)), json.load(open(a.torch)) if a.torch else None, a.plot,
             json.load(open(a.hip)) if a.hip else None, a.title)
        return
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    bench = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2])) if len(sys.argv) == 3 else None
    results = bench["results"]
    check_bytes(results)
    read = bench.get("read_bandwidth", {})
    read_gbps = read.get("GBps", 0) if read.get("verified") else 0
    copy = torch["copy"]["GBps"] if torch else 0
    sdpa = {r["name"]: r for r in torch["decode"]} if torch else {}
    tmqa = {r["name"]: r for r in torch["mqa"]} if torch else {}
    mm = torch["matmul"]["TFLOPs"] if torch and "matmul" in torch else 0
    by_name = {r["preset"]: r for r in results}
    dev = results[0]["device"] if results else "?"
    backend = results[0]["backend"] if results else "?"
    line = f"Device: {dev} ({backend} backend"
    line += ", the NVIDIA twin of the HIP code: not an AMD number)" if backend == "hip" and "NVIDIA" in dev else ")"
    if read_gbps:
        line += (f"; read bandwidth through this backend {read_gbps:.4g} GB/s (qattn_read_stream, "
                 f"{read['bytes'] / 2**20:.0f} MiB, median of {len(read.get('samples_us', []))})")
    if torch:
        line += f"; copy rate {copy:.0f} GB/s" + (f", f16 matmul {mm:.0f} TFLOP/s" if mm else "")
        line += f" (torch {torch['torch']}, same run)"
    print(line + ".\n")

    def fmt(x, f):
        return f.format(x) if x else "-"

    decode = [r for r in results if r["op"] == "decode"]
    if decode:
        print("| preset | bytes | floor us | qattn us | % of read bandwidth | decode-pattern read us | "
              "% of decode-pattern read | % of copy rate | torch SDPA us | target | met? |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in decode:
            if r.get("error"):
                print(f"| {r['preset']} | {r['bytes'] / 1e6:.1f} MB | - | FAILED: {r['error']} | - | - | - | - | - | - "
                      f"| NO |")
                continue
            # qattn_decode_read over the same call: the reads of decode's own
            # access pattern alone (shown only when its word sum matched)
            pat = r.get("pattern_us", 0) if r.get("pattern_verified") else 0
            g = gbps(r["bytes"], r["median_us"])
            s = sdpa.get(r["preset"])
            target, met = verdict(r, by_name, copy, s["median_us"] if s else None)
            floor = r["bytes"] / (copy * 1e3) if copy else 0
            print(f"| {r['preset']} | {r['bytes'] / 1e6:.1f} MB | {fmt(floor, '{:.1f}')} | {r['median_us']:.1f} | "
                  f"{fmt(100 * g / read_gbps if read_gbps else 0, '{:.0f}%')} | {fmt(pat, '{:.1f}')} | "
                  f"{fmt(100 * pat / r['median_us'] if pat else 0, '{:.0f}%')} | "
                  f"{fmt(100 * g / copy if copy else 0, '{:.0f}%')} | {fmt(s['median_us'] if s else 0, '{:.1f}')} | "
                  f"{target} | {met} |")
        print()
        print("| preset | shape | variant | splits | median us (min-max) | GB/s | check |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in decode:
            if r.get("error"):
                continue
            s = r.get("shape", {})
            shape = (f"B{s.get('B')} R{s.get('R')} Hq{s.get('Hq')} Hkv{s.get('Hkv')} D{s.get('D')} "
                     f"{s.get('dtype')} {s.get('keys')} keys P{s.get('page')}"
                     f"{' q f16' if s.get('q') == 'f16' else ''}") if s else "-"
            print(f"| {r['preset']} | {shape} | {r['variant']} | {r['splits']} | {r['median_us']:.2f} "
                  f"({r['min_us']:.2f}-{r['max_us']:.2f}) | {gbps(r['bytes'], r['median_us']):.4g} | "
                  f"{'matched' if r['verified'] else 'MISMATCH'} |")
        print()
    mqa = [r for r in results if r["op"] == "mqa_logits" and not r.get("error")]
    if mqa:
        print("| preset | variant | slices | median us (min-max) | TFLOP/s | % of matrix ceiling | "
              "% of f16 matmul | torch fp8 TFLOP/s | speed-up | bar (issue 10) | met | check |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in mqa:
            tf = r["flops"] / (r["median_us"] * 1e6) if r["median_us"] else 0
            t = tmqa.get(r["preset"])
            tt = f"{t['TFLOPs']:.1f}" if t else "-"
            sp = f"{t['median_us'] / r['median_us']:.1f}x" if t and r["median_us"] else "-"
            ceil = r.get("ceiling_tflops") or 0
            bar = MQA_TARGETS.get(r["preset"])
            met = "-" if bar is None else ("yes" if r["verified"] and tf >= bar else "no")
            print(f"| {r['preset']} | {r['variant']} | {r['splits']} | {r['median_us']:.1f} "
                  f"({r['min_us']:.1f}-{r['max_us']:.1f}) | {tf:.1f} | "
                  f"{f'{100 * tf / ceil:.0f}% ({ceil:.0f})' if ceil else '-'} | "
                  f"{fmt(100 * tf / mm if mm else 0, '{:.0f}%')} | "
                  f"{tt} | {sp} | {'>= %d TFLOP/s' % bar if bar else '-'} | {met} | "
                  f"{'matched' if r['verified'] else 'MISMATCH'} |")


if __name__ == "__main__":
    main()

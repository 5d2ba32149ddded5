#!/usr/bin/python3
# Holds a sweep's figures against llama-server's own, from the result folder alone:
#  - single-stream decode tok/s (specctl's clock) within 10% of the mean of llama's
#    timings.predicted_per_second over the same requests (the server's clock);
#  - every accept length equal to llama's "mean len" over the window's requests, read again
#    here from the bytes of server.log the result names (server_log_window).
# usage: llamacpp_check.py RESULT_DIR
import json, re, sys, glob, os

LINE = re.compile(rb"draft acceptance = [0-9.]+ \(\s*(\d+) accepted /\s*\d+ generated\), mean len =\s*([0-9.]+)")
bad = 0

def llama_mean_len(log, window):
    accepted = passes = 0
    for m in LINE.finditer(log[window[0]:window[1]]):
        a, mean = int(m.group(1)), float(m.group(2))
        if mean > 1:
            accepted += a
            passes += round(a / (mean - 1))
    return 1 + accepted / passes if passes else None

results = sorted(glob.glob(os.path.join(sys.argv[1], "variants", "*", "result.json")))
if not results:
    print(f"FAILED: no variants/*/result.json in {sys.argv[1]}")
    sys.exit(1)
for result_file in results:
    folder = os.path.dirname(result_file)
    variant = os.path.basename(folder)
    r = json.load(open(result_file))
    log = open(os.path.join(folder, "server.log"), "rb").read()
    ss = r["benchmarks"]["single-stream"]
    ours = ss["metrics"].get("decode_tok_s")
    records = [json.loads(l) for l in open(os.path.join(folder, "requests-single-stream.jsonl"))]
    theirs = [x["server_tok_s"] for x in records if x.get("server_tok_s")]
    theirs = sum(theirs) / len(theirs) if theirs else None
    ratio = ours / theirs if ours and theirs else None
    print(f"{variant}: single-stream decode {ours:.1f} tok/s, llama's own {theirs:.1f} tok/s, ratio {ratio:.3f}")
    if ratio is None or abs(ratio - 1) > 0.10:
        bad += 1
        print(f"  FAILED: more than 10% apart")
    holders = [("single-stream", ss)] + [(f"parallel c{l['concurrency']}", l) for l in r["benchmarks"]["parallel"]["levels"]]
    for name, h in holders:
        a = h.get("metrics", {}).get("accept_length")
        expected = llama_mean_len(log, h["server_log_window"]) if "server_log_window" in h else None
        if a is None and expected is None:
            continue
        same = a is not None and expected is not None and abs(a - expected) < 1e-9
        src = h.get("accept_length_source", {}).get("how", "?")
        print(f"  {name}: accept length {a}, llama's mean len over the window {expected} ({src})")
        if not same:
            bad += 1
            print("  FAILED: not equal")
    # Every request had a prompt of its own: llama.cpp served (almost) none of it from its cache.
    prompt = sum(h.get("metrics", {}).get("prompt_tokens") or 0 for _, h in holders)
    cached = sum(h.get("metrics", {}).get("cached_tokens") or 0 for _, h in holders)
    print(f"  prompt tokens {prompt}, of them from llama's prefix cache {cached}")
    if not prompt or cached > 0.05 * prompt:
        bad += 1
        print("  FAILED: no prompt tokens reported, or more than 5% of them cached")
# The report: repeated levels have intervals, and nothing is green or red without one.
report = json.load(open(os.path.join(sys.argv[1], "report.json")))
for table in report["levels"]:
    for row in table["rows"]:
        for cell in row["levels"]:
            n = (cell.get("output_tok_s") or {}).get("n", 0)
            ci = (cell.get("speedup") or {}).get("ci95_low")
            if n != table["repeats"] or (cell["verdict"] in ("faster", "slower") and ci is None):
                bad += 1
                print(f"  FAILED: {row['variant']} {cell['label']}: {n} samples of {table['repeats']}, "
                      f"verdict {cell['verdict']} with interval low {ci}")
    print(f"report {table['benchmark']}: " + "; ".join(f"{r['variant']} {r['crossover']['text']}"
                                                      for r in table["rows"] if r["crossover"]["runs"]))
sys.exit(1 if bad else 0)

#!/usr/bin/env python3
"""Write the officially resolved predictions of the real submissions that
docs/audit.md ("On real submissions") audits, one folder per submission
with resolved_preds.jsonl, read from the clones of the repositories that
published them at the commits the figures were measured on.

usage: realsubs.py ACR_GIT CODER_GIT MINI_GIT OUT_DIR
  ACR_GIT   a clone of nus-apr/auto-code-rover (SWE-agent's and ACR's runs)
  CODER_GIT a clone of NL2Code/CodeR
  MINI_GIT  a clone of gruckion/mini-swe-agent (Gemini 3 Pro on Verified)
"""
import json
import os
import re
import subprocess
import sys

ACR = "3536ac292e3062ffb3f6e98457958e2b803228d6"
CODER = "d63468344bc215bbabb8f0c1ba4af24897a946df"
MINI = "d12a71affd95403b036b2bdbd827349b77bfffb9"
GEMINI = "swebench_results/20251118_gemini-3-pro-74pct"


def show(git, commit, path):
    return subprocess.run(
        ["git", "--git-dir", git, "show", f"{commit}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def loose_json(text):
    # CodeR's results.json has trailing commas, which json refuses.
    return json.loads(re.sub(r",(\s*[\]}])", r"\1", text))


def preds(text):
    text = text.strip()
    if text.startswith("["):
        return json.loads(text)
    if text.startswith("{"):
        try:
            d = json.loads(text)
            return list(d.values()) if "instance_id" not in d else [d]
        except json.JSONDecodeError:
            pass
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write(out, name, model, predictions, resolved):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    resolved = set(resolved)
    n = 0
    with open(os.path.join(out, name, "resolved_preds.jsonl"), "w") as f:
        for p in predictions:
            if p["instance_id"] in resolved and (p.get("model_patch") or "").strip():
                row = {"instance_id": p["instance_id"], "model_name_or_path": model,
                       "model_patch": p["model_patch"]}
                f.write(json.dumps(row) + "\n")
                n += 1
    print(f"{name}: {n} resolved predictions (report: {len(resolved)})")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    acr, coder, mini, out = sys.argv[1:5]
    for i in (1, 2, 3):
        d = f"results/swe-agent-results/cost_2_{i}"
        report = json.loads(show(acr, ACR, f"{d}/final_report.json"))
        write(out, f"lite-sweagent-gpt4-run{i}", f"sweagent-gpt4-run{i}",
              preds(show(acr, ACR, f"{d}/all_preds.jsonl")), report["resolved"])
        d = f"results/acr-run-{i}"
        report = json.loads(show(acr, ACR, f"{d}/new_eval_results/report.json"))
        write(out, f"lite-acr-gpt4-run{i}", f"acr-gpt4-run{i}",
              preds(show(acr, ACR, f"{d}/predictions_for_swebench.json")),
              report["resolved"])
    report = loose_json(show(coder, CODER, "results.json"))
    write(out, "lite-coder", "coder", preds(show(coder, CODER, "all_preds.jsonl")),
          report["resolved"])
    summary = json.loads(show(mini, MINI, f"{GEMINI}/results_summary.json"))
    write(out, "verified-mini-gemini3pro", "mini-gemini3pro",
          preds(show(mini, MINI, f"{GEMINI}/trajs/preds.json")),
          [r["instance_id"] for r in summary["instances"] if r["resolved"]])


if __name__ == "__main__":
    main()

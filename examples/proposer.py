"""A formula proposer with no LLM: random search, then mutation of the best, driven only
through the oracle's protocol (``python -m harness.search.propose --jsonl``).

    python examples/proposer.py --rounds 2 --per-round 8 -- shape=resnet 'shape.select=[l03]' target=mi300x

Each round writes one JSON object per formula to the oracle's stdin and reads one JSON
verdict per formula from its stdout (see docs/search.md, "Proposing formulas").  An agent built on
a language model would replace ``propose`` and keep the rest.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys

#: Formula templates with integer holes; {x} etc. are filled with small constants.
TEMPLATES = [
    "pid",
    "(pid * {a}) % num_pids",                                         # a permutation iff gcd(a, num_pids) = 1
    "(pid % {x}) * (num_pids // {x}) + pid // {x}",                   # seed 000's formula, any XCD count
    ("xcd = pid % num_xcds\nlarger = num_pids % num_xcds\nper = num_pids // num_xcds\n"
     "new_pid = min(xcd, larger) * (per + 1) + max(xcd - larger, 0) * per + pid // num_xcds"),
    ("in_group = {g} * num_pid_n\nfirst = pid // in_group * {g}\nrows = min(num_pid_m - first, {g})\n"
     "new_pid = (first + pid % in_group % rows) * num_pid_n + pid % in_group // rows"),
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(a=rng.choice([3, 5, 7, 11, 13, 31, 97]), x=rng.choice([2, 4, 8, 16]),
                           g=rng.choice([1, 2, 4, 8, 16, 32]))


def propose(rng: random.Random, best: list[dict], count: int) -> list[tuple[str, str]]:
    """(template, formula) pairs: half new random ones, half re-filled templates of the best so far."""
    out = []
    for i in range(count):
        template = best[i % len(best)]["template"] if best and i % 2 else rng.choice(TEMPLATES)
        out.append((template, fill(template, rng)))
    return out


def ask_oracle(formulas: list[str], overrides: list[str]) -> list[dict]:
    """One oracle call: JSON lines in, one JSON verdict per formula out (in order)."""
    stdin = "".join(json.dumps({"id": i, "formula": f}) + "\n" for i, f in enumerate(formulas))
    proc = subprocess.run([sys.executable, "-m", "harness.search.propose", "--jsonl", *overrides], input=stdin,
                          capture_output=True, text=True, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-round", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the oracle (after --)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    leaderboard: list[dict] = []
    for round_number in range(args.rounds):
        proposals = propose(rng, leaderboard, args.per_round)
        verdicts = ask_oracle([formula for _, formula in proposals], args.overrides)
        for (template, _), verdict in zip(proposals, verdicts):
            print(f"round {round_number} #{verdict['id']}: {verdict['verdict']:<18} "
                  f"L2 {verdict['l2_hit_rate'] if verdict['l2_hit_rate'] is not None else '-'}  "
                  f"{verdict['formula'].splitlines()[-1][:70]}")
            if verdict["accepted"] and verdict["l2_hit_rate"] is not None:
                leaderboard.append({**verdict, "template": template})
        leaderboard.sort(key=lambda v: v["l2_hit_rate"], reverse=True)
        leaderboard = leaderboard[:4]
    if leaderboard:
        top = leaderboard[0]
        print(f"best: L2 {top['l2_hit_rate']:.2f}% ({top['l2_source']}), run {top['run_ids']}:\n{top['formula']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

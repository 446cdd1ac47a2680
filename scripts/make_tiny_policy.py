"""Build the embedded tiny policy (mucode/assets/tiny/): tokenizer, model, supervised warm-up.

    .venv/bin/python scripts/make_tiny_policy.py [--out mucode/assets/tiny] [--steps 1500]

The command line over ``mucode.train.tiny_build`` (its docstring says how the policy is made; no
downloads). ``--eval`` samples from the result at temperature 1 and prints its reward measured with
a quick in-process check (NOT the sandbox; the verifier is the judge during training).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from mucode.assets import TINY_POLICY_DIR
from mucode.train.tiny_build import Recipe, build_tiny_policy, quick_eval

_HELP = {
    "p_correct": "share of warm-up answers that are right",
    "p_format": "share of warm-up answers in the scored format",
    "threads": "torch CPU threads (1 is fastest on a busy machine)",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=TINY_POLICY_DIR)
    for field in dataclasses.fields(Recipe):
        parser.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=type(field.default),
            default=field.default,
            help=_HELP.get(field.name),
        )
    parser.add_argument("--eval", action="store_true", help="measure the reward of the result (quick check)")
    parser.add_argument("--eval-only", action="store_true")
    args = parser.parse_args()
    recipe = Recipe(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Recipe)})
    if not args.eval_only:
        build_tiny_policy(args.out, recipe, progress=lambda line: print(line, flush=True))
        print(f"saved to {args.out}")
    if args.eval or args.eval_only:
        for split in ("train", "test"):
            print(f"quick reward at T=1 ({split}):", quick_eval(args.out, recipe.eval_samples, split))


if __name__ == "__main__":
    main()

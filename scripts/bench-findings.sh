#!/usr/bin/env bash
# Scores the findings on the planted worlds (study/src/planted): for each
# world and strategy, the strategy's real proposals are run in-process on
# an engine that is a formula with noise, and the findings drawn from them
# are checked against the truth: planted facts found, claims the truth
# contradicts, and findings on the objectives left not determined. Before:
# the whole budget searches; after: the findings' share of it settles what
# the search left open (study/src/settle.rs); side by side in one run. With
# --compare=plan, before: memory modelled in bytes alone; after: with each
# world's planner (study/src/findings/planned.rs). With --compare=paired,
# before: a share's items counted alone; after: compared one by one
# between trials (study/src/findings/paired.rs). With --compare=pick,
# before: the share settles effects at the baseline only; after: at the
# pick too (study/src/findings/at_pick.rs), and "open" counts what is
# open at the pick. No engine needed; about a minute a seed in a release
# build.
# Usage: scripts/bench-findings.sh [--seeds=N] [--budget=TRIALS] [--world=NAME] [--compare=plan|paired|pick] [--verbose]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --quiet --release -p tunebook-study --example bench_findings
exec target/release/examples/bench_findings "$@"

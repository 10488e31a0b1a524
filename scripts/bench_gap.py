"""The gap between trials of a study Tunebook ran, by trials so far, beside
Optuna's proposal times on the same space; called by scripts/bench-gap.sh.

Tunebook's gap is read from its database: for each trial after the first,
its start (when it left the queue) less the end of the trial before it,
which is the proposal and the runner's bookkeeping; the trial's own launch
and measurement are not in it. Optuna's is the time `ask` takes with that
many trials told, values from a cheap stand-in of the fake engine's speed
and memory (a proposal's cost hardly depends on the values). GPSampler's
ask refits its Gaussian process each time and grows with the study: it is
timed once at each reported count, after that many trials drawn at random.
"""

import json
import math
import sqlite3
import statistics
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


def gaps(db_path):
    rows = sqlite3.connect(db_path).execute(
        "SELECT started_ms, finished_ms FROM trials WHERE started_ms IS NOT NULL "
        "AND finished_ms IS NOT NULL ORDER BY id"
    ).fetchall()
    out = []
    for (_, ended), (started, _) in zip(rows, rows[1:]):
        out.append((started - ended) / 1000.0)
    took = [(f - s) / 1000.0 for s, f in rows]
    return out, took


def buckets(n):
    """Trial counts to report at: every tenth of the study."""
    step = max(1, n // 10)
    return list(range(step, n + 1, step))


def suggest(trial, name, spec):
    if isinstance(spec, list):
        return trial.suggest_categorical(name, spec)
    if "step" in spec:
        return trial.suggest_int(name, spec["min"], spec["max"], step=spec["step"])
    if spec.get("log"):
        return trial.suggest_int(name, spec["min"], spec["max"], log=True)
    points = spec["points"]
    values = [spec["min"] + (spec["max"] - spec["min"]) * i / (points - 1) for i in range(points)]
    return trial.suggest_categorical(name, values)


def stand_in(params):
    tps = 4000 * params["threads"] * (1 + 0.1 * math.log2(params["batch_size"] / 64))
    rss = 1e8 + params["ctx_size"] * 1e4 + params["ubatch_size"] * 1e5
    return tps, rss


def optuna_times(space, n, sampler):
    """Each ask's time, asked and told one after the other: for samplers
    whose ask stays cheap as the study grows (TPE)."""
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    at = {}
    for i in range(n):
        started = time.perf_counter()
        trial = study.ask()
        params = {k: suggest(trial, k, spec) for k, spec in space.items()}
        at[i] = time.perf_counter() - started
        study.tell(trial, stand_in(params))
    return at


def history(space, n):
    """`n` told trials, drawn at random: a study's past to ask after."""
    study = optuna.create_study(
        directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=0)
    )
    for _ in range(n):
        trial = study.ask()
        study.tell(trial, stand_in({k: suggest(trial, k, spec) for k, spec in space.items()}))
    return study.trials


def ask_times_at(space, counts, make_sampler, give_up=120.0):
    """One ask's time after each of `counts` told trials: for samplers whose
    ask grows with the study (GPSampler refits its process on every ask),
    where asking at every count would take hours. Stops once an ask takes
    longer than `give_up` seconds."""
    past = history(space, max(counts))
    at = {}
    for k in counts:
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=make_sampler())
        study.add_trials(past[:k])
        started = time.perf_counter()
        trial = study.ask()
        for name, spec in space.items():
            suggest(trial, name, spec)
        at[k] = time.perf_counter() - started
        if at[k] > give_up:
            break
    return at


def mean_around(values, i, width):
    window = values[max(0, i - width) : i]
    return statistics.mean(window) if window else float("nan")


def main():
    db_path, study_path = sys.argv[1], sys.argv[2]
    space = json.load(open(study_path))["space"]
    gap, took = gaps(db_path)
    n = len(gap) + 1
    print(f"{n} trials; a trial itself took {statistics.median(took):.2f} s (median)")
    tpe = optuna_times(space, n, optuna.samplers.TPESampler(seed=1, multivariate=True))
    counts = buckets(n)
    try:
        gp = ask_times_at(space, counts, lambda: optuna.samplers.GPSampler(seed=1))
    except ImportError as e:
        print(f"GPSampler not run: {e}")
        gp = {}
    width = max(1, n // 10)
    print(f"\nTunebook and TPE: mean over the {width} trials before each count; "
          "GPSampler: one ask after that many trials; seconds")
    print(f"{'trials so far':>14} {'Tunebook gap':>13} {'(max)':>7} {'Optuna TPE':>11} {'GPSampler':>10}")
    for k in counts:
        ours = mean_around(gap, k - 1, width)
        worst = max(gap[max(0, k - 1 - width) : k - 1], default=float("nan"))
        theirs = mean_around([tpe[i] for i in range(n)], k, width)
        gp_k = gp.get(k, float("nan"))
        print(f"{k:>14} {ours:>13.3f} {worst:>7.3f} {theirs:>11.3f} {gp_k:>10.3f}")

if __name__ == "__main__":
    main()

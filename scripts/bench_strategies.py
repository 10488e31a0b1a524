"""Optuna's samplers on Tunebook's planted search worlds, beside the
project's own strategies; called by scripts/bench-strategies.sh.

Each Optuna trial is measured by the project's oracle (the same world, the
same noise and the same cost model the project's strategies face), which
also says what share of the true Pareto hypervolume the trials so far
reach. A configuration that fails is told to Optuna as infeasible through
a constraint set on the trial (values at the worst end), so samplers that learn
constraints can; one measured outside the study's bounds, through the same
constraint, with its values. Prints, per world, the median trials and modelled hours to
the target share over the seeds, and each one's ratio to multivariate TPE;
on standard error, where each of Optuna's searches ended and the share it
reached.
"""

import json
import os
import statistics
import subprocess
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


def suggest(trial, p):
    if p["kind"] == "int":
        if p["log"]:
            return str(trial.suggest_int(p["name"], p["low"], p["high"], log=True))
        return str(trial.suggest_int(p["name"], p["low"], p["high"], step=p["step"]))
    if p["kind"] == "float":
        return repr(trial.suggest_float(p["name"], p["low"], p["high"], log=p["log"]))
    return trial.suggest_categorical(p["name"], p["values"])


# The samplers run unless OPTUNA names others (a comma-separated list of
# these keys). `optuna_gp` (Optuna's GPSampler: a Gaussian process and
# log expected hypervolume improvement, BoTorch's way) needs scipy and
# torch, which the shell script installs only when it is asked for, and
# proposes in seconds, not milliseconds.
SAMPLERS = {
    "optuna_tpe": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True),
    "optuna_nsga2": lambda seed: optuna.samplers.NSGAIISampler(seed=seed),
    "optuna_gp": lambda seed: optuna.samplers.GPSampler(seed=seed),
}
DEFAULT_SAMPLERS = "optuna_tpe,optuna_nsga2"


def sampler(kind, seed):
    # Each reads the constraints set on each trial (Trial.set_constraint).
    return SAMPLERS[kind](seed)


def run_optuna(binary, world, kind, seed, max_trials, target):
    oracle = subprocess.Popen(
        [binary, "oracle", world["name"], str(seed)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    directions = [
        "maximize" if o["goal"] == "max" else "minimize" for o in world["objectives"]
    ]
    study = optuna.create_study(directions=directions, sampler=sampler(kind, seed))
    # The baseline first, as Tunebook's runner does.
    study.enqueue_trial(world["baseline"])
    worst = None
    reached = None
    share = 0.0
    for n in range(1, max_trials + 1):
        trial = study.ask()
        config = {p["name"]: suggest(trial, p) for p in world["params"]}
        oracle.stdin.write(json.dumps(config) + "\n")
        oracle.stdin.flush()
        reply = json.loads(oracle.stdout.readline())
        values = reply["values"]
        if values is None:
            # Failed: the worst values seen, and a violated constraint.
            values = worst or [0.0 if d == "maximize" else 1e300 for d in directions]
            trial.set_constraint("fails", 1.0)
        else:
            # Measured, and within the study's bounds or not: the same that
            # the project's strategies are told.
            trial.set_constraint("fails", -1.0 if reply["feasible"] else 1.0)
            worst = [
                min(w, v) if d == "maximize" else max(w, v)
                for w, v, d in zip(worst or values, values, directions)
            ]
        study.tell(trial, values)
        share = reply["share"]
        if share >= target:
            reached = (n, reply["minutes"] / 60.0)
            break
    oracle.stdin.close()
    oracle.wait()
    # Each search's end on stderr, so that one that falls short says how
    # far it came.
    end = f"reached at {reached[0]}" if reached else f"short at {max_trials}"
    print(f"{world['name']} {kind} seed {seed}: {end}, share {share:.3f}", file=sys.stderr)
    return reached


def median(xs):
    return statistics.median(xs) if xs else None


def main():
    binary, project_file, seeds, max_trials, target = sys.argv[1:6]
    seeds, max_trials, target = int(seeds), int(max_trials), float(target)
    worlds = json.loads(subprocess.check_output([binary, "worlds"], text=True))
    if len(sys.argv) > 6:
        named = sys.argv[6].split(",")
        worlds = [w for w in worlds if w["name"] in named]
    runs = {}  # (world, strategy) -> [(trials, hours) or None]
    with open(project_file) as f:
        for line in f:
            r = json.loads(line)
            got = (r["trials"], r["hours"]) if r["trials"] is not None else None
            runs.setdefault((r["world"], r["strategy"]), []).append(got)
    kinds = os.environ.get("OPTUNA", DEFAULT_SAMPLERS).split(",")
    unknown = [k for k in kinds if k not in SAMPLERS]
    if unknown:
        sys.exit(f"unknown Optuna sampler {unknown}; known: {', '.join(SAMPLERS)}")
    if "optuna_tpe" not in kinds:
        sys.exit("OPTUNA must include optuna_tpe: every ratio is to it")
    for w in worlds:
        for kind in kinds:
            for seed in range(1, seeds + 1):
                runs.setdefault((w["name"], kind), []).append(
                    run_optuna(binary, w, kind, seed, max_trials, target)
                )

    def summary(results):
        # A run that never reached the target counts as max_trials (and
        # its hours as unknown): the median is then a lower bound.
        trials = [r[0] if r else max_trials for r in results]
        hours = [r[1] for r in results if r]
        missed = sum(1 for r in results if not r)
        return median(trials), median(hours), missed

    print(
        f"Trials (and modelled hours: {5} min a load, 1 min of probes a trial) "
        f"to {target:.0%} of the true hypervolume; median over {seeds} seeds, "
        f"at most {max_trials} trials"
    )
    for w in worlds:
        print(f"\n{w['name']}: {w['configurations']} configurations, "
              f"{len(w['params'])} settings, {len(w['objectives'])} objectives")
        print(f"  {'strategy':<14}{'trials':>8}{'hours':>8}{'missed':>8}{'× TPE':>8}")
        tpe = summary(runs[(w["name"], "optuna_tpe")])[0]
        for (world, kind), results in runs.items():
            if world != w["name"]:
                continue
            trials, hours, missed = summary(results)
            ratio = f"{trials / tpe:.2f}" if tpe else "-"
            hours = f"{hours:.1f}" if hours is not None else "-"
            print(f"  {kind:<14}{trials:>8}{hours:>8}{missed:>8}{ratio:>8}")


if __name__ == "__main__":
    main()

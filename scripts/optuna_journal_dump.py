"""Loads an Optuna journal file the way Optuna's own tools do
(JournalStorage over a JournalFileBackend) and prints, as JSON, every
study in it: its name, directions and trials (state, parameters, values,
user attributes). Used by the test of `tunebook export --format
optuna-journal`: what Optuna reads back is compared with what Tunebook
stored.
Usage: python optuna_journal_dump.py JOURNAL
"""

import json
import sys

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

storage = JournalStorage(JournalFileBackend(sys.argv[1]))
out = []
for summary in optuna.get_all_study_summaries(storage):
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    out.append(
        {
            "name": study.study_name,
            "directions": [d.name for d in study.directions],
            "trials": [
                {
                    "number": t.number,
                    "state": t.state.name,
                    "params": t.params,
                    "distributions": {
                        k: type(d).__name__ for k, d in t.distributions.items()
                    },
                    "values": t.values,
                    "user_attrs": t.user_attrs,
                    "has_times": t.datetime_start is not None
                    and t.datetime_complete is not None,
                }
                for t in study.trials
            ],
            # What optuna-dashboard draws first: the front a study's
            # complete trials make.
            "best": [t.number for t in study.best_trials],
        }
    )
print(json.dumps(out))

"""The collect step: a run's failures classified, triaged and grouped, its state and
verdict (``collect.py``); the isolate step for the failures their history cannot blame
(``isolate.py``); and their replay over stored runs (``reclassify.py``)."""

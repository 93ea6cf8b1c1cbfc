"""The collect step: a run's failures classified, triaged and grouped, its state and
verdict; and their replay over stored runs (``reclassify.py``)."""

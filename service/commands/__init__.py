"""The write side: functions that change rows (runs, breakages, torch builds).

Each takes a session and never commits: the caller (a CLI command, an API route, a pipeline
step) owns the unit of work. Reads live beside this, in ``service/queries/``.
"""

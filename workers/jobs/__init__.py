"""The bodies of the scheduled jobs: plain functions the Celery tasks (``workers/tasks.py``)
call, on the beat schedule (``workers/schedule.py``), and the CLI calls too."""

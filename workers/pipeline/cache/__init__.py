"""What a worker keeps on disk: where each thing is and its lock (``layout.py``), and when
it is removed (``gc.py``)."""

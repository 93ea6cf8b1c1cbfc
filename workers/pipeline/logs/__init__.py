"""A step's log: capped and masked on the worker's disk, streamed to the database."""

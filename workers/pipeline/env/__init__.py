"""The provision step: a torch spec resolved to one artifact, the shared base env made or
reused for it, and the run's own env over that base."""

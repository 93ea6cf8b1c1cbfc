"""The build step, and what every step reads or returns: the recipe, the step's outcome,
the run's own tree of the backend's source."""

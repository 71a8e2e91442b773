"""The search: candidates from a generator, timed, the finalists verified, the best kept (issue 5, 6)."""

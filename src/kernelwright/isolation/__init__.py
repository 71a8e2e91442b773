"""Isolation: every job that runs code kernelwright did not write (references, candidates, baselines, the tuning
worker, the problem and export probes) runs in a child process under one policy — its own process group, a time
limit, an address-space limit where no GPU is in play, a scrubbed environment — and reports through a pipe.

``process`` is the parent's side (:func:`~kernelwright.isolation.process.run_child`), ``child`` the child's
(:class:`~kernelwright.isolation.child.Channel`, the job's run), ``protocol`` the records both speak and the job
registry; each job's own records live in :mod:`kernelwright.jobs`.
"""

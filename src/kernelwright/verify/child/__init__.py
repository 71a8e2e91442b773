"""What runs beside untrusted code: the verifier's trust boundary, drawn in the tree.

Every module here runs inside a job process beside the candidate's code (the ``candidate`` and ``sanitize`` jobs,
``untrusted = True`` in kernelwright/jobs/), where the candidate can read, patch or replace anything in memory. The
parent never trusts what these modules compute except through the reports it judges (kernelwright/jobs/ records,
read back over the channel and judged in verify/verifier.py, verify/judging.py, verify/boundary.py ...). So
nothing here imports the parent-side judging modules (verify.verifier, verify.boundary, verify.sequence,
verify.judging, verify.findings, verify.report, verify.decoys, verify.sanitize, isolation.process) or the tools
above them (bench, search, llm): the child records and reports, the parent decides.
tests/verify/child/test_boundary_layout.py holds the rule.

- candidate.py: the candidate job (``run_candidate_job``): trials, timing, builds, cubins;
- integrity.py: the integrity monitor (watched identities, threads, the audit hook);
- launches.py: what the candidate launched (Triton, CUDA extensions, profiler kernels, aten operators);
- poison.py: free memory and new allocations filled with poison before a call;
- sanitize.py: the sanitize job (``run_sanitize_job``): one forward under compute-sanitizer;
- timing.py: ``measure`` and ``Clock`` (trusted jobs that time, baseline and tune, use it too).

The modules both sides share (verify.runtime, verify.tensors, verify.trials, verify.inputs) live in verify/, not
here.
"""

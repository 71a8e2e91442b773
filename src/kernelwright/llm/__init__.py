"""The LLM generator (issue 6): an OpenAI-compatible client, prompts built from the problem, the hardware knowledge
base and the verifier's feedback, and robust extraction of the ``ModelNew`` file from a response.

Nothing here imports ``openai`` at import time: it is an optional extra (``pip install 'kernelwright[llm]'``).
Generated code is never run here — only inside the verifier's isolated child.
"""

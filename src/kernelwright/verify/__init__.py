"""The verifier: isolated, correct, honest, timed. "Protocol rule N" in its modules is a rule of docs/protocol.md;
"integrity #N" a row of docs/integrity.md (the exploit that rule answers). What runs beside untrusted code is
verify/child/ (its __init__ states the rule); the rest judges from the jobs' reports or is shared by both."""

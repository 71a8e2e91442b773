"""The verifier: isolated, correct, honest, timed. "Protocol rule N" in its modules is a rule of docs/protocol.md;
"integrity #N" a row of docs/integrity.md (the exploit that rule answers)."""

"""The verifier: isolated, correct, honest, timed (DESIGN.md, "Verification protocol")."""

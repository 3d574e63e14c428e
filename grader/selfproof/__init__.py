"""The kit proves itself: selfcheck, runner acceptance, curated and generated mutants, the attack corpus."""

"""What the harness runs: the built-in benchmarks (:mod:`.benchmarks`) and the attack suite
(:mod:`.attacks`). Import from the modules."""

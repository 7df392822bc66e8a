"""The attack suite: four attack categories as benchmarks (:mod:`.categories`), their data
(:mod:`.templates`), the multi-turn attacker (:mod:`.multiturn`), attack-success scoring
(:mod:`.scoring`) and the paper's Table 4 (:mod:`.report`). Import from the modules."""

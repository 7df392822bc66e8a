"""The paper's studies beyond the benchmark tables: boundary profiling with retest and H1
(:mod:`.boundary`), cross-turn tension (:mod:`.cross_turn`) and defense-mechanism accuracy
(:mod:`.defense_accuracy`). Their commands live in :mod:`psychoalign.cli`. Import from the modules."""

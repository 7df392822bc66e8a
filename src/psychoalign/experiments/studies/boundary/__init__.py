"""Boundary profiling: a labelled corpus (:mod:`.corpus`) negotiated (:mod:`.negotiate`), tension by
domain and category (:mod:`.run`), test–retest (:mod:`.retest`, ICC in :mod:`.reliability`), H1 on
rated data (:mod:`.h1`), the report files (:mod:`.report`), resuming (:mod:`.checkpoint`) and
synthetic worlds that validate the pipeline (:mod:`.synthetic`). Import from the modules."""

"""Boundary profiling: a labelled corpus (:mod:`.corpus`) negotiated (:mod:`.negotiate`), tension by
domain and category (:mod:`.run`), test–retest (:mod:`.retest`, ICC in :mod:`.reliability`), H1 on
rated data (:mod:`.h1`), the report files (:mod:`.report`), both as cells of the experiment
harness's result store, so they resume and shard (:mod:`.cells`), and synthetic worlds that
validate the pipeline (:mod:`.synthetic`). Import from the modules."""

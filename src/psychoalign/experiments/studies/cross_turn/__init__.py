"""Cross-turn tension, measured: the ``mt-bench-followup`` benchmark (:mod:`.followup`) and the
scripted world with known escalation (:mod:`.world`, run by :mod:`.run`). Import from the modules."""

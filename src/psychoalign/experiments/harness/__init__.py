"""The harness: a spec of systems x benchmarks, the runner that claims and scores every cell into a
resumable result store, the judges of a run and their calibration, per-cell cost, and the report.
The package's face is :mod:`psychoalign.experiments`; import the rest from its module."""

"""The accounts store's migrations (revision files r<NNNN>_<slug>.py)."""

"""The GPU placement admission policy: built from the model (policy.py), evaluated offline (cel.py, evaluate.py)."""

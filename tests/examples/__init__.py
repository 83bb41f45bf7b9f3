"""The examples of composing aks-gpu in other stacks (``examples/``) and the docs' code, kept working."""

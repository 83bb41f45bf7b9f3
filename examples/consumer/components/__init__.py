"""This team's own components: the same folder name as the aks-gpu repository's, which is why the library imports as
``aks_gpu`` and never as ``components``."""

"""lcpo: online reinforcement learning in non-stationary, context-driven environments.

Locally Constrained Policy Optimization (Hamadanian et al., ICLR 2025) and its baselines, the windy
environments, context traces, and the online loop that scores agents by their lifelong return.
"""

__version__ = "0.1.0"

"""Numerics shared by the agents: GAE and window targets, exact categorical math, the return normaliser."""

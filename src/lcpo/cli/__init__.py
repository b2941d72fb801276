"""The ``lcpo`` command line: ``run``, ``traces``, ``envs``, ``agents``, ``sweep``, ``report``, ``figure``."""

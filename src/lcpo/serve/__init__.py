"""``lcpo serve``: a live policy server that keeps learning, for systems written in any language.

Modules: :mod:`~lcpo.serve.protocol` (streams, decisions, validation: a state machine over log records),
:mod:`~lcpo.serve.log` (the append-only log and its reader), :mod:`~lcpo.serve.learner` (one agent learning
from the log, acting snapshots), :mod:`~lcpo.serve.process` (that learner in its own process),
:mod:`~lcpo.serve.app` (the Starlette application and the server), :mod:`~lcpo.serve.http` (uvicorn's
protocol with one write per answer and the direct lane for decisions), :mod:`~lcpo.serve.spec` (spaces of a
system without a Gymnasium env), :mod:`~lcpo.serve.client` (a Python client). docs/serving.md.
"""

"""Experience memories: replay buffer (off-policy, rehearsal), rollout batch (on-policy), reservoir."""

# --- replay buffer (memory/replay.py) ---
from lcpo.memory.replay import ReplayBuffer

__all__ = ["ReplayBuffer"]

# --- rollout batch and reservoir (memory/rollout.py, memory/reservoir.py): appended below ---

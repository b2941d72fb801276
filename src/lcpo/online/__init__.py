"""The online loop (one stream of experience) and one run: env + agent + loop + log + checkpoints + summary."""

"""One run: the loop (`loop`), its set-up steps (`setup_steps`), the resumable state and plan (`state`), checkpoints,
signals, the run folder, progress and trackers, training dynamics, what the end of a run writes (`finish`,
`results`), the dry run, and notebook launches (`notebook`)."""

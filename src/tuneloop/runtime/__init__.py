"""The process: machine facts (CPU flags, devices, launcher, package versions), speed levers set and restored
(`speed.SpeedLevers`), and everything process-wide a run or a command sets and gives back (`process`)."""

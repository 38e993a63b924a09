"""Options: `TrainConfig` (every option, its help and validation), option values from text and YAML (`parsing`), one
command-line flag per option (`flags`), and the layers that make the final config (`resolve`; presets in `presets/`)."""

"""Options: `TrainConfig` (every option, its help and validation; the data section is `data_options.DataOptions`,
which it inherits), how an option is declared with its traits (`fields`), option values from text and YAML
(`parsing`), one command-line flag per option (`flags`), and the layers that make the final config (`resolve`;
presets in `presets/`)."""

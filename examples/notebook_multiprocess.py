"""In a notebook (Colab TPU/GPU, or CPU processes): the whole run inside accelerate.notebook_launcher.

Paste into a cell of a fresh kernel (no Accelerator may exist before the launch).
"""

import tuneloop

results = tuneloop.notebook_train(tuneloop.TrainConfig(task="mrpc", data_dir="glue_data/MRPC", epochs=3),
                                  num_processes=2)
print(results["eval"])

"""Models: resolve `--model`, load and save with tuneloop.json (`loading`), AdamW and the schedule (`optim`), the
training loss (`losses`), ONNX export and an ONNX Runtime session behind the model's calling convention
(`onnx_model`)."""

"""Models: resolve `--model`, its config, load and save with tuneloop.json (`loading`), the tokenizer and its checks
(`tokenizer`), the attention per architecture (`attention`), LoRA adapters (`lora`), AdamW and the schedule
(`optim`), regression targets learned standardised (`target_scale`), ONNX export and an ONNX Runtime session
(`onnx_model`)."""

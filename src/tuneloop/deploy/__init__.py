"""Shipping a trained model: `tuneloop export` (ONNX, int8, with an accuracy gate) and `tuneloop serve` (FastAPI on
uvicorn, dynamic batching). Each needs its extra: `pip install "tuneloop[export]"` / `"tuneloop[serve]"`."""

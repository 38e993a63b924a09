"""tuneloop from Python: fine-tune on your own CSV, then predict with the saved model.

    python examples/train_and_predict.py train.csv dev.csv new.csv
"""

import sys

import tuneloop
from tuneloop.predict import predict_file, predict_texts

train_csv, dev_csv, new_csv = sys.argv[1:4]
results = tuneloop.train(tuneloop.TrainConfig(train_file=train_csv, validation_file=dev_csv, epochs=3,
                                              output_dir="runs/example", overwrite=True))
print("dev metrics:", results["eval"], "best:", results["best"])

model_dir = "runs/example/model"
print("one example:", predict_texts(model_dir, ["a sentence to classify"]))
count = predict_file(model_dir, new_csv, "runs/example/new.predictions.csv")
print(f"{count} predictions in runs/example/new.predictions.csv")

"""tuneloop from Python: fine-tune on your own CSV, then predict with the saved model.

    python examples/train_and_predict.py train.csv dev.csv new.csv
"""

import sys

import tuneloop

train_csv, dev_csv, new_csv = sys.argv[1:4]
results = tuneloop.train(train_file=train_csv, validation_file=dev_csv, epochs=3, output_dir="runs/example",
                         overwrite=True)
print("dev metrics:", results["eval"], "best:", results["best"])

with tuneloop.load("runs/example/model") as clf:          # loads once; the saved decision rule applies
    print("one example:", clf.predict("a sentence to classify"))
    print("metrics on dev.csv again:", clf.evaluate(dev_csv)["eval"])

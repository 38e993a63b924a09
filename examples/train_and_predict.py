"""tuneloop from Python with files: fine-tune on your own CSVs, then predict a new CSV with the saved model.

    python examples/train_and_predict.py train.csv dev.csv new.csv [MODEL]

The CSVs need a text column (text, sentence, review, ... or two for pairs) and, for train and dev, a label column
(label, labels, score, ...); name yours with text_columns=[...] / label_column="..." if detection cannot tell.
Predictions go to predictions.csv beside new.csv: its rows, a label and one prob_<class> column per class.
"""

import sys
from pathlib import Path

import pandas as pd

import tuneloop

train_csv, dev_csv, new_csv = sys.argv[1:4]
model = sys.argv[4] if len(sys.argv) > 4 else "minilm"         # the embedded all-MiniLM-L6-v2
result = tuneloop.train(train_file=train_csv, validation_file=dev_csv, model=model, epochs=3,
                        output_dir="runs/example", overwrite=True)
print("dev metrics:", result["eval"], "best:", result["best"])

with tuneloop.load(result.output_dir) as clf:      # loads once; the saved decision rule applies
    new = pd.read_csv(new_csv)
    predictions = new.join(clf.predict(new))       # one call for every row, on new's index
    out = Path(new_csv).with_name("predictions.csv")
    predictions.to_csv(out, index=False)
    print(f"wrote {len(predictions)} predictions to {out}")
    print("metrics on dev.csv again:", clf.evaluate(dev_csv)["eval"])

"""tuneloop in a notebook with pandas: a DataFrame in, a trained classifier out, DataFrames of predictions.

Uses the MRPC sample shipped with tuneloop (400 training and 100 validation sentence pairs from GLUE MRPC); run it
as a script or paste it into cells. An optional argument names another model (a folder or a Hub id):

    python examples/notebook_dataframe.py [MODEL]
"""

import sys
from importlib.resources import files

import pandas as pd

import tuneloop

model = sys.argv[1] if len(sys.argv) > 1 else "minilm"        # the embedded all-MiniLM-L6-v2
sample = files("tuneloop") / "sample_data" / "mrpc"


def read(name: str) -> pd.DataFrame:
    frame = pd.read_csv(sample / name, sep="\t", quoting=3, encoding="utf-8-sig")
    frame = frame.rename(columns={"#1 String": "first", "#2 String": "second"})
    return frame.assign(paraphrase=frame.Quality.map({1: "equivalent", 0: "not_equivalent"}))


train, dev = read("train.tsv"), read("dev.tsv")
result = tuneloop.train(train=train, validation=dev, text_columns=["first", "second"], label_column="paraphrase",
                        model=model, epochs=1, output_dir="runs/notebook-dataframe", overwrite=True, quiet=True)
print("dev metrics:", {k: round(v, 4) for k, v in result["eval"].items()})

classifier = result.classifier                     # the saved model, loaded once; its decision rule applies
predictions = classifier.predict(dev[["first", "second"]].head(5))      # a DataFrame on dev's index
print(predictions)
print("per class:", classifier.evaluate(dev)["per_class"])

"""pandas in and out of a Classifier: which columns of a DataFrame (or a Series) hold the texts, and predictions
as a DataFrame with the input's index, `label` (or `score`) and one `prob_<class>` column per class."""

from __future__ import annotations

from ..data.columns import detect_columns, named
from ..data.memory import reads_as_text
from ..exceptions import DataError, TuneloopError
from .inputs import Framed, as_text, checked


def is_frame(data, text_columns=None) -> bool:
    """Whether `data` is a pandas DataFrame or Series; `text_columns` (which only a frame has) refused otherwise."""
    frame = type(data).__name__ in ("DataFrame", "Series") and hasattr(data, "index")
    if text_columns is not None and not frame:          # had been ignored without a word
        raise TuneloopError(f"text_columns: names columns of a pandas DataFrame; the texts given ("
                            f"{type(data).__name__}) have none: leave text_columns out")
    return frame


def text_columns_of(frame, recorded: list[str], pair: bool | None, given=None) -> list[str]:
    """The columns given, or the model's own text columns when the frame has them, in any letter case or with
    spaces around them (data.columns.named, as a file's are found); else those detected by their usual names
    (`review`, `sentence1,sentence2`), as `tuneloop predict --input` finds a file's; else the frame's only column
    (two for a pair model)."""
    columns = [str(c) for c in frame.columns]           # pd.DataFrame(texts) names its column 0: read as "0"
    if given:
        names = [str(c) for c in ([given] if isinstance(given, str) else list(given))]
        missing = [c for c in names if named(columns, c) is None]
        if missing:
            raise TuneloopError(f"text_columns: the DataFrame has no column {missing[0]!r} (columns: "
                                f"{', '.join(columns)})")
        return [named(columns, c) for c in names]
    found = [named(columns, c) for c in recorded]
    if recorded and None not in found:
        return found
    want = 2 if pair else 1
    try:
        detected = list(detect_columns("DataFrame", columns, None, None, need_label=False).text)
    except DataError:
        detected = []
    if detected and (len(detected) == want or (pair is None and not recorded)):
        return detected
    if len(columns) == want or (pair is None and len(columns) in (1, 2)):
        return columns
    reads = f"the model reads {', '.join(recorded)}" if recorded else f"the model reads {want} text column(s)"
    raise TuneloopError(f"DataFrame: cannot tell which columns hold the texts ({reads}; the frame has "
                        f"{', '.join(columns)}); pass text_columns=[...]")


def frame_items(frame, recorded: list[str], pair: bool | None, given=None) -> list[tuple[str, str | None]]:
    """(text, second text or None) per row, checked as every input is (inputs.checked): an empty or missing cell is
    an error naming its row and column."""
    hint = "; the texts look like the DataFrame's index: pass frame.reset_index(names=\"text\")"
    kind = type(frame).__name__
    if kind == "Series" and pair is not False and len(frame) and all(
            isinstance(v, (tuple, list)) and len(v) == 2 for v in frame.tolist()):     # a Series of (first, second)
        import pandas as pd

        frame = pd.DataFrame(frame.tolist(), index=frame.index,
                             columns=recorded if len(recorded) == 2 else ["first", "second"])
        given = None
    elif kind == "Series":
        frame = frame.to_frame(name=str(frame.name) if frame.name is not None else "text")
        hint = "; the texts look like the Series' index: pass series.index"
    columns = text_columns_of(frame, recorded, pair, given)
    names = [str(c) for c in frame.columns]
    repeated = [c for c in columns if names.count(c) > 1]
    if repeated:                                        # frame["review"] would be two columns: read as a pair
        raise TuneloopError(f"{kind}: {names.count(repeated[0])} columns are named {repeated[0]!r} (columns: "
                            f"{', '.join(names)}); rename them, or select the text column(s)")
    label_of = {str(c): c for c in frame.columns}       # the frame's own column labels (0, not "0") to index it
    rows = list(frame[[label_of[c] for c in columns]].itertuples(index=False, name=None))
    if not (len(frame.index) and all(reads_as_text(x) for x in list(frame.index[:100]))):
        # a number as its text, as training reads the same frame; not where the texts are the index (the column
        # left is then no text column: checked's message says to reset the index)
        rows = [tuple(as_text(v) for v in row) for row in rows]
    return checked(rows, pair, recorded, Framed(frame.index, columns, hint, "Series" if kind == "Series" else
                                                "DataFrame"))


def as_frame(flat_rows: list[dict], index):
    """Prediction rows (predict/rows.prediction_rows) as a DataFrame on the input's index, without the id."""
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in row.items() if k != "id"} for row in flat_rows], index=index)

"""A real multi-label text set from Debian's own archive metadata: each package's English description (synopsis and
long description, from the Translation-en index) with its debtags (the Tag field of the Packages index) restricted
to LABELS. Needs the apt lists with translations: `apt-get update -o Acquire::Languages=en` (Debian's mirror is
reachable here). Descriptions are deduplicated by their md5 (-dev/-data packages often share one), so a text
appears once; the split into train/validation/test is seeded."""

from __future__ import annotations

import csv
import glob
import os
import random
import re
import subprocess

LABELS = ("role::program", "role::shared-lib", "role::devel-lib", "role::documentation", "interface::commandline",
          "interface::graphical", "interface::daemon", "works-with::text", "works-with::audio", "works-with::image",
          "use::gameplaying")
LISTS = "/var/lib/apt/lists"


def _translations() -> dict[str, str]:
    """Description-md5 -> 'synopsis. long description' from every Translation-en index apt has."""
    out = {}
    for path in sorted(glob.glob(os.path.join(LISTS, "*_i18n_Translation-en*"))):
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path], capture_output=True, text=True,
                              check=True).stdout
        for block in text.split("\n\n"):
            md5 = re.search(r"^Description-md5: (\S+)", block, re.M)
            desc = re.search(r"^Description-en: (.*)\n((?: .*\n?)*)", block, re.M)
            if md5 and desc:
                body = " ".join(line.strip() for line in desc.group(2).splitlines() if line.strip() != ".")
                out[md5.group(1)] = f"{desc.group(1).strip()}. {body}".strip()
    return out


def _tags() -> dict[str, list[str]]:
    """Description-md5 -> the package's debtags (the first package with that description)."""
    text = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    out = {}
    for block in text.split("\n\n"):
        md5 = re.search(r"^Description-md5: (\S+)", block, re.M)
        tag = re.search(r"^Tag: (.*(?:\n .*)*)", block, re.M)
        if md5 and tag and md5.group(1) not in out:
            out[md5.group(1)] = [t.strip() for t in tag.group(1).replace("\n", " ").split(",") if t.strip()]
    return out


def write_debtags(out_dir: str, n: int = 5000, seed: int = 0, shares=(0.6, 0.2, 0.2)) -> dict:
    """train.csv, validation.csv, test.csv (text, labels joined by '|') in out_dir; returns what was built."""
    texts, tags = _translations(), _tags()
    rows = sorted((texts[m], "|".join(t for t in LABELS if t in tags[m])) for m in tags if m in texts)
    rows = [r for r in rows if r[1]]
    if len(rows) < n:
        raise SystemExit(f"only {len(rows)} tagged descriptions: run `apt-get update -o Acquire::Languages=en`")
    rng = random.Random(seed)
    rows = rng.sample(rows, n)
    cuts = [0, round(n * shares[0]), round(n * (shares[0] + shares[1])), n]
    counts = {}
    for name, a, b in zip(("train", "validation", "test"), cuts, cuts[1:]):
        with open(os.path.join(out_dir, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "labels"])
            writer.writerows(rows[a:b])
        counts[name] = b - a
    per_label = {t: sum(t in r[1].split("|") for r in rows) for t in LABELS}
    return {"rows": counts, "per_label": per_label, "tagged_descriptions": len(texts),
            "source": "Debian bookworm Packages (Tag) + Translation-en (Description-en) indexes"}

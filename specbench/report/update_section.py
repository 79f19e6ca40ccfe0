"""The report section of `specbench update` (update.csv in the update's run directory): the new head's word
per level of the run it updates, and whether each word was predicted (from that run's step cost and the
head's new acceptance) or measured."""

from __future__ import annotations

from specbench.report.derived import RunData, read_csv
from specbench.report.document import Block, Heading, Paragraph, Table
from specbench.report.fmt import fmt, fmt_interval

UPDATE_FILE = "update.csv"


def update_section(data: RunData) -> list[Block]:
    words = read_csv(data.path / UPDATE_FILE)
    if not len(words):
        return []
    rows = [[str(r["variant"]), fmt(r["concurrency"], 0), str(r["word"]), str(r["source"]),
             fmt_interval(r["predicted"], r["predicted_low"], r["predicted_high"]),
             fmt_interval(r["measured"], r["measured_low"], r["measured_high"])] for _, r in words.iterrows()]
    first = words.iloc[0]
    predicted = int((words["source"] == "predicted").sum())
    return [Heading("Update: a new head decided from its acceptance"),
            Paragraph([f"This run measured a new head of {first['reference_variant']}'s drafter configuration in "
                       f"{first['reference_run']} (one launch, at its highest level, on its prompts). Per level of "
                       f"that run: the word, predicted from its step cost and the new acceptance where the "
                       f"prediction's 95% interval (step cost, acceptance, prompts and the model's own error) "
                       f"decides, else measured here, else left to measure. {predicted} of {len(words)} words "
                       "predicted (docs/metrics.md, \"Update: a predicted word\")."], "note"),
            Table(["variant", "C", "word", "source", "predicted", "measured"], rows, numeric=frozenset({1}))]

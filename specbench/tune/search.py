"""`specbench tune`: successive halving per concurrency, then the confirmation (docs/metrics.md, "Tuning").

A client of the matrix runner: each round is an ordinary RunConfig (the baseline plus the round's
settings, one variant each) run by `run_matrix` into its own run directory under the tune directory;
the search reads the rounds' cells.csv and nothing else. Per tuned variant and concurrency the better
half (by the geometric mean of its speedups over the level's points) goes on to the next round, measured
with twice the launches; the last one standing is measured against the baseline on the held-out prompts, with the
sweep's own launches and repeats, and decided by the verdict's own outcomes (report/decisions.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from specbench.config import RunConfig
from specbench.records.rundir import RunDir
from specbench.server.engines import ENGINES
from specbench.shared.errors import ConfigError, RunDirError
from specbench.shared.progress import Reporter, make_reporter
from specbench.tune.result import Round, TuneResult, launch_argv, param_names, score, search_score, spec_k
from specbench.tune.rounds import (
    RoundSpec,
    round_config,
    search_spec,
    settings,
    split_prompts,
    variant_of,
    write_prompts,
)


@dataclass
class TuneOptions:
    out: Path
    resume: bool = False
    reuse: Path | None = None  # an earlier tune directory: its rounds' unchanged settings are reused
    scheduler: Literal["local", "slurm"] = "local"
    budget_h: float | None = None  # refuse to start a round past this wall time
    skip_preflight: bool = False
    reporter: Reporter | None = None


def halve(ranked: list[tuple[str, float]]) -> list[str]:
    """The better half (rounded up) by score, highest first; an unmeasured (NaN) setting ranks last."""
    order = sorted(ranked, key=lambda t: (math.isnan(t[1]), -t[1] if not math.isnan(t[1]) else 0.0))
    return [n for n, _ in order[:math.ceil(len(order) / 2)]]


class Tune:
    def __init__(self, cfg: RunConfig, opts: TuneOptions):
        self.cfg, self.opts = cfg, opts
        self.reporter = opts.reporter or make_reporter()
        self.started = time.monotonic()

    def _run(self, spec: RoundSpec) -> Round:
        from specbench.runner import RunOptions, run_matrix

        elapsed_h = (time.monotonic() - self.started) / 3600
        if self.opts.budget_h is not None and elapsed_h > self.opts.budget_h:
            raise RunDirError(f"tune: the budget of {self.opts.budget_h:g} h is spent before {spec.label} "
                              f"({elapsed_h:.2f} h); rounds measured so far are kept in {self.opts.out}")
        cfg = round_config(self.cfg, spec)
        rd = self.opts.out / spec.label
        resume = RunDir(rd).meta.exists()
        earlier = RunDir(self.opts.reuse / spec.label) if self.opts.reuse else None
        reuse = earlier.path if earlier and earlier.meta.exists() else None
        self.reporter.log(f"tune: {spec.label}: {len(spec.variants)} setting(s) and the baseline at C="
                          f"{','.join(map(str, spec.concurrency))}, {spec.repeats} repeat(s)"
                          + (" (resumed)" if resume else ""))
        result = run_matrix(cfg, RunOptions(out=rd, resume=resume, reuse=None if resume else reuse,
                                            skip_preflight=self.opts.skip_preflight, scheduler=self.opts.scheduler,
                                            reporter=self.opts.reporter))
        failed = [n for n, s in result.status.items() if s in ("failed", "interrupted")]
        if self.cfg.baseline.name in failed:
            raise RunDirError(f"tune: the baseline failed in {spec.label}; see {rd}")
        if failed:
            self.reporter.log(f"tune: {spec.label}: {', '.join(failed)} failed (ranked last)")
        return Round(spec.label, rd, RunDir(rd).load_cells())

    def run(self) -> TuneResult:
        cfg = self.cfg
        assert cfg.tune is not None
        grid = settings(cfg)
        res = TuneResult(tune_dir=self.opts.out, grid=grid)
        self.opts.out.mkdir(parents=True, exist_ok=True)
        search_file, confirm_file = self._split()
        alive = {(v, c): [s.name for s in ss] for v, ss in grid.items() for c in cfg.sweep.concurrency}
        round_no = 1
        while (spec := search_spec(cfg, grid, alive, round_no, search_file)) is not None:
            rnd = self._run(spec)
            res.rounds.append(rnd)
            for key, names in alive.items():
                if key[1] not in spec.concurrency or (len(names) == 1 and round_no > 1):
                    continue
                ranked = [(n, score(rnd.cells, n, key[1])) for n in names]
                res.scores.setdefault(key, []).extend((spec.label, n, s) for n, s in ranked)
                alive[key] = halve(ranked) if len(names) > 1 else names
            round_no += 1
        res.final = {key: names[0] for key, names in alive.items()}
        res.confirm = self._confirm(res, confirm_file)
        return res

    def _split(self) -> tuple[Path, Path]:
        from specbench.plan.prompts import load_prompts

        assert self.cfg.tune is not None
        split = split_prompts(load_prompts(self.cfg.sweep.prompts), self.cfg.tune.confirm_fraction, self.cfg.sweep.seed)
        paths = self.opts.out / "prompts-search.jsonl", self.opts.out / "prompts-confirm.jsonl"
        if self.opts.resume and all(p.exists() for p in paths):
            return paths  # the split the earlier rounds used
        write_prompts(paths[0], split.search)
        write_prompts(paths[1], split.confirm)
        return paths

    def _confirm(self, res: TuneResult, prompts_file: Path) -> Round:
        from specbench.tune.schedule import ranges, vllm_schedule

        cfg = self.cfg
        names = sorted(set(res.final.values()))
        by_name = {s.name: s for ss in res.grid.values() for s in ss}
        variants = [variant_of(cfg, by_name[n]) for n in names]
        if ENGINES.get(cfg.engine.kind).dynamic_schedule:  # the dynamic schedule runs as one launch: measure it
            argv = launch_argv(res.rounds)
            for tuned in res.grid:
                # the search's choice: the last setting standing where it beat the baseline, else plain
                choices: dict[int, str | None] = {c: res.final[(tuned, c)] if search_score(res, tuned, c) > 1 else None
                                                  for c in cfg.sweep.concurrency}
                base = next(v for v in cfg.variants if v.name == tuned)
                dyn, _ = vllm_schedule(ranges(choices), argv)
                if dyn is None or len(set(choices.values())) < 2 or "per_batch_size" not in param_names(base.drafter):
                    continue  # nothing to switch between, or a drafter that cannot take a schedule
                top = max((by_name[n] for n in set(choices.values()) if n), key=lambda s: spec_k(argv[s.name]))
                params = {**base.params, **top.params, "per_batch_size": dyn["num_speculative_tokens_per_batch_size"]}
                name = f"{tuned[:55]}-dynamic"
                variants.append(base.model_copy(update={"name": name, "params": params, "baseline": False}))
                res.dynamic[tuned], res.dynamic_params[tuned] = name, params
        spec = RoundSpec(label="confirm", variants=variants, concurrency=list(cfg.sweep.concurrency),
                         repeats=cfg.sweep.repeats, launches=cfg.sweep.launches, prompts_file=prompts_file)
        return self._run(spec)


def run_tune(cfg: RunConfig, opts: TuneOptions) -> TuneResult:
    """Run the search and the confirmation, then write tune.json, tune.md and tune.png (output.py)."""
    from specbench.tune.output import write_outputs

    if cfg.tune is None:
        raise ConfigError("tune", "specbench tune needs a tune: section (tune.variants: {variant: {param: [values]}})")
    if cfg.sweep.load.open:
        raise ConfigError("sweep.load.kind", "tune compares closed-loop speedups per concurrency (load.kind: closed)")
    if not ENGINES.get(cfg.engine.kind).launched:
        raise ConfigError("engine.kind", "tune launches one server per setting; an external endpoint serves what is "
                          "already running (use kind command with the server's argv template)")
    if not opts.resume:
        if opts.out.exists() and any(opts.out.iterdir()):
            raise RunDirError(f"{opts.out} already exists and is not empty: use --resume to finish that tune")
        from specbench.config import dump_config

        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "tune-config.yaml").write_text(dump_config(cfg))
    res = Tune(cfg, opts).run()
    write_outputs(cfg, res)
    return res

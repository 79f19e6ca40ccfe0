"""The pieces of `--scheduler slurm` that need no cluster: merging part files, Slurm's reason for a step's
end, ports on a shared host, which node served what."""

from __future__ import annotations

from pathlib import Path

from specbench.records.rundir import RunDir
from specbench.runner.parts import merge_parts, open_part_sink, part_files, placements, record_placement
from specbench.runner.session import RecordSink
from specbench.server.slurm import Allocation, step_reason
from specbench.shared.schema import RequestRecord, WindowRecord


def _req(i: int, window: str = "v|p|r1") -> RequestRecord:
    return RequestRecord(variant="v", cell_id="v|p", point_id="p", window_id=window, category="code", prompt_id="x",
                         output_len=8, concurrency=1, repeat=1, index=i, t_send=100.0 + i, output_tokens=8)


def _win(window: str = "v|p|r1") -> WindowRecord:
    return WindowRecord(window_id=window, variant="v", cell_id="v|p", point_id="p", repeat=1, t_start=100.0,
                        t_end=110.0, n_requests=2)


def test_merge_adds_each_record_once_even_after_a_crash_mid_merge(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    part = open_part_sink(rd, "v", "run1")
    for i in range(3):
        part.request(_req(i))
    part.window(_win())
    part.close()
    head = RecordSink.open(rd, "run1")
    head.request(_req(0))  # a head that died after merging one record
    assert merge_parts(rd, "v", "run1", head) == 3
    assert merge_parts(rd, "v", "run1", head) == 0
    head.close()
    assert [r.index for r in rd.request_records()] == [0, 1, 2]
    assert [w.window_id for w in rd.window_records()] == ["v|p|r1"]
    assert part_files(rd, "v", "run1")[0].exists()  # the part stays: raw measurements are never deleted


def test_merge_reads_only_this_runs_parts(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    old = open_part_sink(rd, "v", "old-run")
    old.request(_req(0))
    old.close()
    head = RecordSink.open(rd, "run2")
    assert merge_parts(rd, "v", "run2", head) == 0
    head.close()


def test_step_reason_prefers_slurms_banner_of_the_last_launch(tmp_path: Path) -> None:
    log = tmp_path / "slurm-step.log"
    log.write_text("$ srun ... launch 1\nslurmstepd-n2: error: *** STEP 3.1 ON n2 CANCELLED AT 2026-11-30 ***\n"
                   "srun: error: n2: task 0: Killed\n$ srun ... launch 2\nsrun: error: n1: task 0: Exited with "
                   "exit code 1\n")
    assert step_reason(log, 1) == "Slurm: n1: task 0: Exited with exit code 1"
    log.write_text(log.read_text() + "slurmstepd-n1: error: *** STEP 4.0 ON n1 DUE TO TIME LIMIT ***\n")
    assert step_reason(log, 1) == "Slurm: *** STEP 4.0 ON n1 DUE TO TIME LIMIT ***"
    log.write_text("$ srun ...\n")
    assert step_reason(log, 137) == "the srun step exited with code 137"
    assert step_reason(tmp_path / "missing.log", None) == "the srun step exited with code None"


def test_ports_move_only_when_nodes_share_a_host() -> None:
    apart = Allocation("1", ("a", "b"), {"a": "10.0.0.1", "b": "10.0.0.2"})
    shared = Allocation("1", ("n1", "n2", "n3"), {"n1": "127.0.0.1", "n2": "127.0.0.1", "n3": "127.0.0.1"})
    assert not apart.shared_host and apart.port_offset("b") == 0
    assert shared.shared_host and [shared.port_offset(n) for n in shared.nodes] == [0, 1, 2]


def test_placements_list_every_node_that_served_a_variant(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    record_placement(rd, "v", 1, {"n2": {"host": "n2", "cpu": "x"}, "n3": {"host": "n3", "cpu": "x"}})
    record_placement(rd, "v", 1, {"n1": {"host": "n1", "cpu": "x"}})  # resumed elsewhere
    nodes, served = placements(rd, ["v", "w"])
    assert served == {"v": ["n2", "n3", "n1"]} and set(nodes) == {"n1", "n2", "n3"}


def test_slurm_scheduler_outside_an_allocation_is_refused_in_one_line(tmp_path, model_dir, port, capsys,
                                                                      monkeypatch) -> None:
    from specbench.cli import main
    from tests.conftest import standin_config, write_config

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    cfg = write_config(tmp_path / "cfg.yaml", standin_config(model_dir, port))
    assert main(["run", str(cfg), "--scheduler", "slurm", "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == ("error: --scheduler slurm runs inside a Slurm allocation (salloc or sbatch): "
                                       "SLURM_JOB_ID is not set\n")
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_multi_node_variant_without_slurm_is_refused(tmp_path, model_dir, port, capsys) -> None:
    from specbench.cli import main
    from tests.conftest import standin_config, write_config

    data = standin_config(model_dir, port)
    data["engine"].update(kind="sglang", nodes=2, command=None)
    cfg = write_config(tmp_path / "cfg.yaml", data)
    assert main(["run", str(cfg), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (f"error: {cfg}: engine.nodes: 2 nodes per variant need --scheduler slurm "
                                       "(inside a Slurm allocation)\n")

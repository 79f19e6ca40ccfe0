"""`specbench tune`: the best drafter settings per concurrency, confirmed on prompts the search never saw.

A driver on top of the matrix runner, never a branch inside it:

    plan       settings (one variant per grid point), the prompt split, each round's ordinary RunConfig,
               the printed plan (launches, time) from pricing/planner.py
    search     successive halving per concurrency through run_matrix, then the confirmation
    schedule   the choice per concurrency as ranges: vLLM's dynamic speculative_config, SGLang flag sets
    result     what the search measured (rounds, scores, the settings standing), shared by search and output
    output     tune.json, tune.md (the report section), tune.png
"""

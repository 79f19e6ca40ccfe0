"""The one YAML file that describes a matrix run, as pydantic models.

`sections` (model, engine, variants, the small sections), `sweep` (load, SLO, capacity), `run` (`RunConfig`,
the rules across sections), `load` (YAML with includes and the alias guard, validation errors as a
`ConfigError` naming the field path). Every name callers use is re-exported here. Reading the model
folder's config.json for its context length is I/O: `preflight.check_model_context`.
"""

from specbench.config.load import (
                   MAX_YAML_NODES,
                   expanded_size,
                   format_validation_error,
                   load_config,
                   load_yaml,
                   non_finite,
                   parse_config,
)
from specbench.config.run import RunConfig, TuneConfig, dump_config
from specbench.config.sections import (
                   DEFAULT_MIN_SPEEDUP,
                   ClientConfig,
                   EngineConfig,
                   EstimatesConfig,
                   ModelConfig,
                   SchedulerConfig,
                   Strict,
                   VariantConfig,
                   VerdictConfig,
                   forced_length,
)
from specbench.config.sweep import (
                   DEFAULT_MAX_IN_FLIGHT,
                   NATURAL,
                   SLO_METRICS,
                   AdaptiveConfig,
                   CapacityConfig,
                   LoadConfig,
                   PromptSource,
                   SubsetConfig,
                   SweepConfig,
                   slo_unit_warnings,
)

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT", "DEFAULT_MIN_SPEEDUP", "MAX_YAML_NODES", "NATURAL", "SLO_METRICS", "AdaptiveConfig",
    "CapacityConfig", "ClientConfig", "EngineConfig", "EstimatesConfig", "LoadConfig", "ModelConfig",
    "PromptSource", "RunConfig", "SchedulerConfig", "Strict", "SubsetConfig", "SweepConfig", "TuneConfig",
    "VariantConfig", "VerdictConfig", "dump_config", "expanded_size", "forced_length", "format_validation_error",
    "load_config", "load_yaml", "non_finite", "parse_config", "slo_unit_warnings",
]

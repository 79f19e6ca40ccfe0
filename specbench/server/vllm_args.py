"""vLLM's own argument parser on the argvs specbench would launch, where vLLM is importable from the
engine's python: the `vllm serve` parser (`make_arg_parser` on a `FlexibleArgumentParser`, then
`validate_parsed_serve_args`) and the `--speculative-config` through vLLM's `SpeculativeConfig`.

Importing vllm takes seconds, so every variant's argv goes to one subprocess of that interpreter.
`SpeculativeConfig`'s field validation runs here; what it derives from the target model (its
`__post_init__` reads the model's config) needs the model and is left to the launch. A method that drafts
with the target's own layers and names no `model` (`mtp` and its aliases, `dspark`: vLLM's own list)
cannot be built without the target's `ModelConfig` at all (vLLM raises "target_model_config must be
present"), and a ModelConfig loads the model's tokenizer and config through transformers (remote code for
K2.6): its `--speculative-config` is left to the parser and to the launch (issue 51 item 1).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from specbench.config import RunConfig
from specbench.server.flag_names import nearest_flag

# Run in the engine's python after a script defines ARGVS ({name: argv}) and check_one(argv) -> error or None:
# every argv's check, its stderr's last line when the parser exits (argparse errors), shared by the SGLang
# check (cli/validate.py) and vLLM's below.
ARGV_LOOP = r"""
results = {}
for name, argv in ARGVS.items():
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            results[name] = check_one(argv)
    except SystemExit as exc:
        lines = [l.strip() for l in err.getvalue().splitlines() if l.strip()]
        results[name] = lines[-1] if lines else f"exit code {exc.code}"
    except Exception as exc:
        results[name] = (f"{type(exc).__name__}: {exc}".splitlines() or ["error"])[0]
"""

# paths as in vLLM 0.32 (vllm/entrypoints/launchers/cli_args.py), and the older ones (<= 0.11)
_CHECK = r"""
import contextlib, io, json, sys
try:
    import vllm
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.config import SpeculativeConfig
    from importlib.util import find_spec
    from typing import get_args
    try:  # the methods whose draft is the target's own layers (vLLM 0.32: mtp, its deprecated aliases)
        from vllm.config.speculative import MTPModelTypes
        FROM_TARGET = set(get_args(MTPModelTypes)) | {"mtp", "dspark"}
    except ImportError:
        FROM_TARGET = {"mtp", "dspark"}
except Exception as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
import pydantic
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
request = json.loads(sys.argv[1])
ARGVS = request["argvs"]


def check_one(argv):
    args = parser.parse_args(argv)
    validate_parsed_serve_args(args)
    spec = getattr(args, "speculative_config", None)
    if isinstance(spec, dict) and not (spec.get("model") is None and spec.get("method") in FROM_TARGET):
        try:
            SpeculativeConfig(**spec)
        except pydantic.ValidationError as exc:
            e = exc.errors()[0]
            loc = ".".join(str(p) for p in e["loc"])
            return f"SpeculativeConfig rejects --speculative-config: {loc}: {e['msg']}"
        except Exception:
            pass  # what it derives from the target model's config: checked at launch
    return None
""" + ARGV_LOOP + r"""
print(json.dumps({"version": vllm.__version__, "flags": sorted(parser._option_string_actions),
                  "entry": find_spec(request["entry"]) is not None, "results": results}))
"""


@dataclass(frozen=True)
class ParserCheck:
    """What vLLM's parser said: `checked` is "" when it could not run (then `why` says why)."""

    version: str = ""
    errors: dict[str, list[str]] | None = None  # {variant: one line per problem (per unknown flag)}
    flags: frozenset[str] = frozenset()  # the parser's option strings
    why: str = ""


def serve_args(argv: list[str]) -> list[str]:
    """The arguments of `vllm serve` in a launch argv (`python -m MODULE [serve] ARGS`)."""
    if "-m" not in argv[:-1]:
        return argv
    rest = argv[argv.index("-m") + 2:]
    return rest[1:] if rest[:1] == ["serve"] else rest


def unknown_flags(argv: list[str], known: set[str]) -> list[str]:
    """Flags of `argv` vLLM's parser does not have (it takes `_` for `-` in names)."""
    flags = [a.partition("=")[0] for a in argv if a.startswith("--") and len(a) > 2]
    return list(dict.fromkeys(f for f in flags if f.replace("_", "-") not in known and f not in known))


def launch_module(argv: list[str]) -> str:
    """The module a launch argv runs (`python -m MODULE`)."""
    return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else "vllm.entrypoints.cli.main"


def check_with_vllm_parser(python: str, argvs: dict[str, list[str]], entry: str = "vllm.entrypoints.cli.main",
                           timeout: float = 300) -> ParserCheck:
    """Every argv (`vllm serve`'s arguments) through vLLM's parser in `python`, in one subprocess, and
    whether the installed vLLM has the module the launch runs (`entry`). An unknown flag is named with its
    nearest real flag (the SGLang equivalent's vLLM name first)."""
    request = {"argvs": argvs, "entry": entry}
    try:
        r = subprocess.run([python, "-c", _CHECK, json.dumps(request)], capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ParserCheck(why=f"could not run {python} ({type(exc).__name__})")
    try:
        result = json.loads((r.stdout.strip().splitlines() or [""])[-1])
    except ValueError:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return ParserCheck(why=f"the check in {python} failed ({tail[:160]})")
    if "import_error" in result:
        return ParserCheck(why=f"vllm is not importable in {python} ({result['import_error'][:120]})")
    version, known = str(result["version"]), set(result["flags"])
    errors = {}
    for name, err in result["results"].items():
        if not err:
            continue
        bad = unknown_flags(argvs[name], known) if "unrecognized arguments" in err else []
        errors[name] = [f"{f} is not a flag of vLLM {version}'s `vllm serve`"
                        + (f" (nearest: {n})" if (n := nearest_flag(f, known)) else "") for f in bad] or [err]
    if not result.get("entry", True):  # specbench picked the entry point for another version than this one
        for name in argvs:
            errors.setdefault(name, []).append(f"vLLM {version} in {python} has no {entry} (the launch would fail); "
                                               f"set engine.version to the vLLM the launch host runs")
    return ParserCheck(version=version, errors=errors, flags=frozenset(known))


def refusal_lines(errors: dict[str, list[str]], cfg: RunConfig) -> list[str]:
    """One line per problem, naming the variants it refuses and, for a flag, the config list it is in:
    `base, ngram: --tp (engine.args) is not a flag of vLLM 0.32.0's `vllm serve` (nearest: ...)`."""
    by_line: dict[str, list[str]] = {}
    for name, lines in errors.items():
        for line in lines:
            by_line.setdefault(line, []).append(name)
    lists = [("engine.args", cfg.engine.args)] + [(f"variants[{i}].args", v.args) for i, v in enumerate(cfg.variants)]
    out = []
    for line, names in by_line.items():
        flag, _, rest = line.partition(" ")
        where = next((w for w, args in lists if any(a.partition("=")[0] == flag for a in args)), "")
        out.append(f"{', '.join(names)}: " + (f"{flag} ({where}) {rest}" if flag.startswith("-") and where else line))
    return out

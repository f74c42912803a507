"""The `report` stage of a paper whose claims are data: its ledger built from `claims.yaml`
(`--spec`) by `common.claims.build`, its metrics and its README's tables (`common.eval.report`)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from common.claims.build import build_ledger, load_spec
from common.errors import ConfigError, exit_on_user_error
from common.eval.report import Table, profile_of, write_ledger_report
from common.stages import StageCLI


def claims_report_main(paper: str, extractors: ModuleType, tables: dict[str, Table],
                       argv: list[str] | None = None) -> None:
    """The `report` stage of `papers/<paper>`: the ledger that `common.claims.build` makes of its
    `claims.yaml` with the paper's `extractors`, its metrics and the tables of its README and pages."""

    @exit_on_user_error
    def run() -> None:
        args = StageCLI(f"Write the claims ledger of papers/{paper} from its claims.yaml, its metrics and the "
                        "README's tables.", ("results", "spec", "readme", "claims", "metrics"), params=False,
                        options={"--pages": {"type": Path, "nargs": "*", "default": [], "metavar": "PATH",
                                             "help": "more pages that hold some of the tables (docs pages)"}}
                        ).parse(argv)
        spec = load_spec(args.spec)
        if spec["paper"] != paper:
            raise ConfigError(f"--spec {args.spec}: declares the claims of {spec['paper']!r}, not {paper!r}")
        write_ledger_report(args, paper, tuple(spec["results"]),
                            lambda results: build_ledger(spec, results, extractors, profile_of(results)), tables)

    run()

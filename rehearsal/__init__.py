"""The `paper` profile's rehearsal (`make rehearse`): stand-ins for the Hub, cut configs, a runner.

Tooling beside the library, like `sizing/`: it imports the project's modules and runs its stages,
and nothing in `common/` or `papers/` imports it.
"""

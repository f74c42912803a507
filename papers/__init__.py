"""One package per paper; each imports from `common` and never from another paper."""

import common  # noqa: F401  (sets the OpenMP wait policy before torch loads; see common/__init__.py)

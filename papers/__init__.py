"""One package per paper; each imports from `common` and never from another paper."""

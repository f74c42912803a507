"""The one judge: the verdict rules (`rules`), the ledger entries and tables they fill (`ledger`),
and the root README's claims page (`page`)."""

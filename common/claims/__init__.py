"""The one judge: the verdict rules (`rules`), the ledger built from a paper's `claims.yaml` and its
extractors (`build`), the entries and tables it fills (`ledger`), the `report` stage that writes it
(`stage`), and the root README's claims page (`page`)."""

"""seqphase.results: everything that reads or writes the zarr store.

store (the store and its sweep groups: template, identity, growth, lock, ledger), writer (the driver's
batched chunk writer), schema (format numbers, status codes, the ledger's variables, the CF attributes of
every variable), verify (checksums, damaged chunks), migrate (older layouts and older variable names),
query (`open_results`, the flat table of `seqphase query`), plot (a sweep's figure) and report (the
agreement table and the static page of `seqphase reproduce`).
"""

"""`dualpath ui`: a local, read-only web viewer over the warehouse.

`viewer.app` serves the pages, `viewer.data` gathers each page's rows (through
`warehouse.viewer`, the only code here that reaches DuckDB), `viewer.pages` shapes them and
`viewer.headline` is the overview's verdict and slowdown. A top layer, like the CLI: it may
use flows, the core, warehouse and evals; none of them imports it.
"""

"""dualpath: is the cheaper LLM serving path as good, and how much slower is it?

The core package: config models, the serving-path client, the scoring pipeline and its
scheduler, the simulated servers and synthetic market of the embedded default, and the CLI.
"""

__version__ = "0.1.0"

"""The one strict base of every settings and plan model: an unknown key is an error (a typo
in `dualpath.toml` or a plan file is refused, never ignored) and a model is frozen once read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that forbids unknown fields and cannot be changed after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

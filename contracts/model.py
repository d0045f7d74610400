"""The base of every pydantic model in the federation: validators built at first use.

Building a model's validator (its core schema) costs about a millisecond a model, and a
process imports far more models than it uses: a ``federation`` command loads the API's
view models, the wire types and the governance types, and uses a handful. Each model
here is built the first time it validates or serialises, which pydantic's
``defer_build`` does; what it accepts and produces is unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A pydantic model built at its first use (see the module's docstring)."""

    model_config = ConfigDict(defer_build=True)

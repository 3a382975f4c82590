"""Constrained types shared by every settings model: each kind of quantity states its range once.

A declaration then carries only its default, the bounds particular to it and its description, e.g.
`timeout_s: Seconds = Field(5.0, le=120, description=...)`; pydantic merges both into one field.
"""

from typing import Annotated

from pydantic import Field

# A window, timeout, interval or horizon: an empty one would divide by zero or never wait.
Seconds = Annotated[float, Field(gt=0)]
# A hold, dwell, warm-up or quiet time: 0 means "at once".
Delay = Annotated[float, Field(ge=0)]
# A level a reading is compared with (PSI %, pages/s, faults/s, a margin in C or W): never negative.
Level = Annotated[float, Field(ge=0)]
# A quantity that must be there at all: a power rating, a number of hours, a ratio of a gain.
Positive = Annotated[float, Field(gt=0)]
# A share of a whole (of the clock, of MemTotal, of the RSS): more than nothing, at most all of it.
Share = Annotated[float, Field(gt=0, le=1)]
# A memory size or reserve in bytes.
Bytes = Annotated[int, Field(ge=0)]
# How many of something may be kept or needed: at least one.
Count = Annotated[int, Field(ge=1)]

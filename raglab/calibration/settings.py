"""The settings of ``raglab calibrate`` that are its own (not Hydra config groups): the
bootstrap's seed and number of resamples, bounded so a typo cannot exhaust memory."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raglab.errors import UserError
from raglab.stats.agreement import DEFAULT_RESAMPLES, DEFAULT_SEED

#: the most bootstrap resamples (calibrate's ``resamples``, compare's ``n_bootstrap``): each
#: resample holds one index per item, so 10^8 of them asked for tens of GB
MAX_RESAMPLES = 100_000


class CalibrateSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seed: int = Field(DEFAULT_SEED, ge=0, le=2**32 - 1, description=(
        "the bootstrap's seed (0 to 2^32-1)"))
    resamples: int = Field(DEFAULT_RESAMPLES, ge=100, le=MAX_RESAMPLES, description=(
        "bootstrap resamples of each interval (100 to 100,000)"))


def parse_settings(given: dict[str, int]) -> CalibrateSettings:
    """The settings; one UserError line naming the setting and its bounds."""
    try:
        return CalibrateSettings.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        field = CalibrateSettings.model_fields[key]
        raise UserError(f"{key}={given.get(key)}: {err['msg'].lower()} "
                        f"({field.description})") from None

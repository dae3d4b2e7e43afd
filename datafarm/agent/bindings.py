"""Bindings: which author backend and which model each agent role uses, its caps and its prices.

Where they come from, first found wins for the file, and variables override what the file says:

1. the file `DATAFARM_BINDINGS` names;
2. `bindings.json` in the workspace (when one is given);
3. `bindings.json` in the current folder;
4. otherwise the defaults (`agent: builtin`, no LLM at all).

Variables: DATAFARM_AGENT (builtin | litellm), DATAFARM_MODEL, DATAFARM_API_BASE, DATAFARM_API_KEY_ENV,
DATAFARM_MODEL_<ROLE> (e.g. DATAFARM_MODEL_EXPERT_AUTHOR) and DATAFARM_CAP_<PHASE> (USD, e.g.
DATAFARM_CAP_EXPERT=2.5). A bindings file looks like

    {"agent": "litellm", "model": "openai/qwen3-coder", "api_base": "http://127.0.0.1:8000/v1",
     "api_key_env": "OPENAI_API_KEY", "roles": {"expert_author": "anthropic/claude-sonnet-4-5"},
     "caps": {"expert": 2.0, "judge": 0.5},
     "prices": {"openai/qwen3-coder": {"input_per_token": 2e-7, "output_per_token": 8e-7}}}

API keys are never stored here: `api_key_env` names the environment variable that holds one, and the
key is read from the environment only when a call is made (it is never logged nor transcribed).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from datafarm.agent.roles import PHASES, ROLES
from datafarm.errors import BadInput

log = logging.getLogger(__name__)

BINDINGS_FILE = "bindings.json"
ENV_FILE = "DATAFARM_BINDINGS"


class BindingsError(BadInput, ValueError):
    """The bindings are missing, malformed or cannot serve a role."""


class ModelPrice(BaseModel):
    """USD per token for a model litellm's price map does not know (self-hosted ones)."""

    model_config = ConfigDict(extra="forbid")
    input_per_token: float = Field(ge=0)
    output_per_token: float = Field(ge=0)


class Bindings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: Literal["builtin", "litellm"] = "builtin"
    model: str | None = Field(None, description="the default model, in litellm's provider/name form")
    roles: dict[str, str] = Field(default_factory=dict, description="role -> model, overriding `model`")
    api_base: str | None = None
    api_key_env: str | None = Field(None, description="the environment variable holding the API key")
    caps: dict[str, float] = Field(default_factory=dict, description="phase -> USD cap on its LLM calls")
    default_cap: float | None = Field(5.0, ge=0, description="USD cap of a phase `caps` does not name")
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(5, ge=0, le=20, description="retries on 429, 5xx, time-outs, lost connections")
    backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles each retry")
    backoff_max_s: float = Field(60.0, ge=0)
    max_turns: int = Field(40, gt=0, description="model calls one role session may make")
    temperature: float | None = None
    source: str = Field("defaults", description="where these bindings were read from (set by the loader)")

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, roles: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown roles {unknown}; known roles: {sorted(ROLES)}")
        return roles

    @field_validator("caps")
    @classmethod
    def _known_phases(cls, caps: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(caps) - set(PHASES))
        if unknown:
            raise ValueError(f"caps for unknown phases {unknown}; phases with LLM roles: {list(PHASES)}")
        if any(v < 0 for v in caps.values()):
            raise ValueError("caps must be >= 0 USD")
        return caps

    @model_validator(mode="after")
    def _litellm_needs_a_model(self) -> Bindings:
        if self.agent == "litellm" and not self.model and set(self.roles) != set(ROLES):
            raise ValueError("agent: litellm needs a default `model` (or a model for every role in `roles`)")
        return self

    # ----- what a session asks ---------------------------------------------------------------------
    def model_for(self, role: str) -> str:
        if role not in ROLES:
            raise BindingsError(f"unknown role {role!r}; known roles: {sorted(ROLES)}")
        model = self.roles.get(role) or self.model
        if not model:
            raise BindingsError(f"no model bound for role {role!r}: set `model` or `roles.{role}` in "
                                f"{BINDINGS_FILE} (or DATAFARM_MODEL / DATAFARM_MODEL_{role.upper()})")
        return model

    def cap_for(self, phase: str) -> float | None:
        return self.caps.get(phase, self.default_cap)

    def cap_hint(self, phase: str) -> str:
        """How to raise a phase's cap, for BudgetExceeded messages."""
        return (f"raise `caps.{phase}` in {self.source if self.source.endswith('.json') else BINDINGS_FILE} "
                f"or set DATAFARM_CAP_{phase.upper()}=<USD>")

    def api_key(self) -> str | None:
        """The key from the environment variable `api_key_env` names (None when none is named)."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise BindingsError(f"bindings name ${self.api_key_env} for the API key but it is not set")
        return key

    def register_prices(self) -> None:
        """Tell litellm the prices of self-hosted models so completion_cost() knows them."""
        if not self.prices:
            return
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map
        import litellm

        entries = {}
        for model, price in self.prices.items():
            provider = model.split("/", 1)[0] if "/" in model else "openai"
            entries[model] = {"input_cost_per_token": price.input_per_token,
                              "output_cost_per_token": price.output_per_token,
                              "cache_read_input_token_cost": 0.0, "cache_creation_input_token_cost": 0.0,
                              "litellm_provider": provider, "mode": "chat"}
        litellm.register_model(entries)


def _from_environment(data: dict) -> dict:
    data = dict(data)
    simple = {"DATAFARM_AGENT": "agent", "DATAFARM_MODEL": "model", "DATAFARM_API_BASE": "api_base",
              "DATAFARM_API_KEY_ENV": "api_key_env"}
    for variable, key in simple.items():
        if os.environ.get(variable):
            data[key] = os.environ[variable]
    for role in ROLES:
        if os.environ.get(f"DATAFARM_MODEL_{role.upper()}"):
            data.setdefault("roles", {})
            data["roles"] = {**data["roles"], role: os.environ[f"DATAFARM_MODEL_{role.upper()}"]}
    for phase in PHASES:
        value = os.environ.get(f"DATAFARM_CAP_{phase.upper()}")
        if value:
            try:
                data["caps"] = {**data.get("caps", {}), phase: float(value)}
            except ValueError:
                raise BindingsError(f"DATAFARM_CAP_{phase.upper()}={value!r} is not a number of USD") from None
    return data


def check_providers(bindings: Bindings) -> None:
    """Every bound model names a provider litellm knows, so a typo fails here, not after the first phases ran."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the price map
    import litellm

    for model in sorted({m for m in [bindings.model, *bindings.roles.values()] if m}):
        provider, _, name = model.partition("/")
        known = provider in litellm.provider_list if name else model in litellm.model_cost
        if not known:
            raise BindingsError(
                f"model {model!r} in {bindings.source} names no provider litellm knows: write it as provider/model "
                "(e.g. openai/my-model for an OpenAI-compatible server at `api_base`, hosted_vllm/..., anthropic/...)")


def bindings_file(workspace: Path | None = None) -> Path | None:
    """The bindings file that applies, or None."""
    if os.environ.get(ENV_FILE):
        path = Path(os.environ[ENV_FILE])
        if not path.is_file():
            raise BindingsError(f"{ENV_FILE}={path} does not name a file: set it to the path of a bindings.json, "
                                "or unset it to use bindings.json here or the built-in author")
        return path
    for folder in ([Path(workspace)] if workspace else []) + [Path.cwd()]:
        if (folder / BINDINGS_FILE).is_file():
            return folder / BINDINGS_FILE
    return None


def load_bindings(workspace: Path | None = None, register: bool = True) -> Bindings:
    """Read, override from the environment, validate, and register self-hosted prices with litellm."""
    path = bindings_file(workspace)
    data: dict = {}
    if path is not None:
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise BindingsError(f"{path} is not valid JSON ({error}): fix it, or delete it to use the built-in "
                                "author") from None
        if not isinstance(data, dict):
            raise BindingsError(f"{path} must hold a JSON object like {{\"agent\": \"builtin\"}} or "
                                "{\"agent\": \"litellm\", \"model\": \"provider/name\", ...}")
        data.pop("source", None)
    try:
        bindings = Bindings.model_validate({**_from_environment(data), "source": str(path or "defaults")})
    except ValidationError as error:
        raise BindingsError(f"bad bindings ({path or 'environment'}): {error}") from None
    log.info("bindings from %s: agent=%s model=%s", bindings.source, bindings.agent, bindings.model)
    if bindings.agent == "litellm":
        check_providers(bindings)
        if register:
            bindings.register_prices()
    return bindings

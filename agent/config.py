"""User configuration: a TOML file plus ``NIB_*`` environment variables, validated.

Precedence, highest first: explicit arguments (CLI flags), ``NIB_*`` variables, the
TOML file (``NIB_CONFIG`` or ``NIB_HOME/config.toml``), defaults. A malformed file
raises AgentConfigError naming the file, what was wrong, and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agent.errors import AgentConfigError
from agent.loop.limits import RENAMED, ZERO_OK, Limits, Profile, limits_for
from chain.home import nib_home
from chain.money import DEFAULT_ETH_PRICE_USDC

__all__ = [
    "ExplicitSettings",
    "LimitOverrides",
    "NibSettings",
    "config_path",
    "known_variables",
    "load_settings",
    "unknown_keys",
    "unknown_variables",
]

DB_FILE = "nib.db"
CONFIG_FILE = "config.toml"


def _limit_overrides() -> type[BaseModel]:
    """One optional field per field of :class:`Limits`, same type, same bounds: derived,
    so a new limit is overridable (``[limits]`` in TOML, ``NIB_LIMITS__MAX_STEPS`` in the
    env) without a second list to keep in step."""
    # A class statement made at run time (what create_model does): create_model's
    # **field_definitions admit no one static type, its own keywords share the mapping.
    annotations: dict[str, object] = {}
    namespace: dict[str, object] = {
        "__module__": __name__,
        "__qualname__": "LimitOverrides",
        "__doc__": "Per-limit overrides; every field of Limits, None meaning not overridden.",
        "__annotations__": annotations,
        "model_config": ConfigDict(extra="forbid"),
    }
    for f in dataclasses.fields(Limits):
        annotations[f.name] = type(f.default) | None
        namespace[f.name] = (
            Field(default=None, ge=0) if f.name in ZERO_OK else Field(default=None, gt=0)
        )
    model = type("LimitOverrides", (BaseModel,), namespace)
    assert issubclass(model, BaseModel)  # BaseModel's metaclass made it
    return model


if TYPE_CHECKING:
    from agent.tools.allowlist import Allowlist

    class LimitOverrides(BaseModel):
        """Per-limit overrides (built from :class:`Limits` at import)."""

else:
    LimitOverrides = _limit_overrides()


def config_path(env: dict[str, str] | None = None) -> Path:
    """Where the TOML file is read from: ``NIB_CONFIG``, else ``NIB_HOME/config.toml``."""
    env = dict(os.environ) if env is None else env
    if env.get("NIB_CONFIG"):
        return Path(env["NIB_CONFIG"]).expanduser()
    return nib_home(env) / CONFIG_FILE


def _read_toml(path: Path) -> dict[str, object]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise AgentConfigError(
            f"config file {path} is not valid TOML ({exc}); expected TOML such as "
            f'`profile = "cost-optimized"` and a [limits] table. Fix: correct that line '
            "or remove the file to use the defaults.",
            source=str(path),
        ) from exc
    except OSError as exc:
        raise AgentConfigError(
            f"config file {path} cannot be read ({exc.strerror}); expected a readable file. "
            "Fix: check its permissions, or point NIB_CONFIG elsewhere.",
            source=str(path),
        ) from exc


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, object]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[object, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, object]:
        return dict(self._data)


#: Settings renamed since config files were written (old name -> name): atomic USDC ends
#: ``_atomic``. NIB_TREASURY_CAP_USDC and a ``treasury_cap_usdc`` key still read.
RENAMED_SETTINGS: dict[str, str] = {"treasury_cap_usdc": "treasury_cap_atomic"}


class _CurrentNames(PydanticBaseSettingsSource):
    """A settings source whose keys under a name since renamed (RENAMED_SETTINGS, and
    agent.loop.limits.RENAMED in ``[limits]``) read as the new name; given both, the new
    one. Per source, so precedence still holds: a variable under either name wins over the
    file under either name."""

    def __init__(self, source: PydanticBaseSettingsSource) -> None:
        super().__init__(source.settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[object, str, bool]:
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, object]:
        data = _current(self._source(), RENAMED_SETTINGS)
        if isinstance(self._source, EnvSettingsSource):  # it reads only current names
            for old, new in RENAMED_SETTINGS.items():
                value = self._source.env_vars.get(f"nib_{old}")
                if value is not None and new not in data:
                    data[new] = value
        limits = data.get("limits")
        if isinstance(limits, dict):
            data["limits"] = _current(limits, RENAMED)
        return data


def _current(data: dict[str, object], renamed: dict[str, str]) -> dict[str, object]:
    """``data`` with each key under an old name under its new one (the new one wins)."""
    old = {renamed[k]: v for k, v in data.items() if k in renamed}
    return old | {k: v for k, v in data.items() if k not in renamed}


class NibSettings(BaseSettings):
    """Validated settings for one invocation. ``limits`` holds explicit overrides only."""

    model_config = SettingsConfigDict(
        env_prefix="NIB_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    home: Path = Field(default_factory=nib_home)
    db_path: Path | None = None
    #: PostgreSQL for every store (``postgresql://user:pass@host/db``); unset: the SQLite file.
    database_url: str | None = Field(default=None, repr=False)
    #: The judge and wallet services' own PostgreSQL database (a role of their own), read by
    #: `nib services up` only: never in an agent process's environment. Unset: the SQLite
    #: file in NIB_HOME/services, or (agent on PostgreSQL) the agent's database, shared.
    services_database_url: str | None = Field(default=None, repr=False)
    #: One cap over every run this wallet pays for, atomic USDC (all workers); unset: none.
    treasury_cap_atomic: int | None = Field(default=None, gt=0)
    profile: Profile | None = None
    network: str = "anvil"
    rpc_url: str | None = None
    usdc_address: str | None = None
    #: The token's EIP-712 domain, when pinned (NIB_USDC_NAME, NIB_USDC_VERSION): a token
    #: reporting another is refused before anything is signed. Unset: the token's own.
    usdc_name: str | None = None
    usdc_version: str | None = None
    #: An x402 paywall to use instead of the devnet's (NIB_PAYWALL_URL); it is allowlisted.
    paywall_url: str | None = None
    judge_url: str | None = None
    judge_address: str | None = None
    judge_token: str | None = Field(default=None, repr=False)
    #: Seller origins and 0x addresses nib may pay (NIB_SELLER_ALLOWLIST, comma-separated);
    #: a bad entry is refused here, when the settings load (see :attr:`allowlist`).
    seller_allowlist: str = ""
    discovery_url: str = ""
    model_provider: str | None = None
    model: str | None = None
    model_base_url: str | None = None
    #: Seconds one model reply may take (NIB_MODEL_TIMEOUT); unset: the adapters' default.
    #: Checked when a model is built (agent.models.factory), as NIB_MODEL_TOOLS is.
    model_timeout: float | str | None = None
    #: How proposals travel (NIB_MODEL_TOOLS): native (falls back on rejection) or json-text.
    model_tools: str | None = None
    #: A hosted model's API key: NIB_OPENAI_API_KEY / NIB_ANTHROPIC_API_KEY, else the
    #: provider's own variable (the plain_* fields). Secrets: never in a repr or a log.
    openai_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    plain_openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    plain_anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias="ANTHROPIC_API_KEY"
    )
    limits: LimitOverrides = Field(default_factory=LimitOverrides)
    #: Whole USDC per ETH when gas counts against the spend cap: handed to the wallet's
    #: meter, whose reservations and the loop's cap projection both use it.
    eth_price_usdc: int = Field(default=DEFAULT_ETH_PRICE_USDC, gt=0)
    #: The wallet keystore's passphrase (on the devnet a documented default is used).
    wallet_password: SecretStr | None = None
    #: The judge key file's passphrase: its own, never the wallet's.
    judge_password: SecretStr | None = None

    @field_validator("home", "db_path", mode="after")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        """``~`` in a path setting means the user's folder (chain.home), as in a shell."""
        return value.expanduser() if value is not None else None

    @field_validator("seller_allowlist", mode="after")
    @classmethod
    def _allowlist_parses(cls, value: str) -> str:
        """Every command refuses a bad entry at start-up, in the parser's own words: its
        AgentConfigError is not a ValueError, so pydantic lets it through unwrapped."""
        if value.strip():
            from agent.tools.allowlist import parse_allowlist

            parse_allowlist(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        data = _read_toml(config_path())
        return (
            init_settings,
            _CurrentNames(env_settings),
            _CurrentNames(_TomlSource(settings_cls, data)),
        )

    @property
    def allowlist(self) -> Allowlist:
        """The allowlist parsed: its seller origins and its addresses."""
        from agent.tools.allowlist import parse_allowlist

        return parse_allowlist(self.seller_allowlist)

    @property
    def database(self) -> str | Path:
        """Where every store lives: ``database_url`` (PostgreSQL) when set, else the shared
        SQLite file (``db_path`` or ``home/nib.db``)."""
        return self.database_url or self.db_path or self.home / DB_FILE

    def resolve_limits(
        self, *, model_local: bool, profile: str | None = None, **flags: float | None
    ) -> tuple[Profile, Limits]:
        """Profile (explicit > configured > by model location) plus overrides (flags win)."""
        overrides = {k: v for k, v in self.limits.model_dump().items() if v is not None}
        overrides.update({k: v for k, v in flags.items() if v is not None})
        return limits_for(profile or self.profile, model_local=model_local, **overrides)


class ExplicitSettings(TypedDict, total=False):
    """Settings a caller gives outright (they win over the environment and the TOML file)."""

    home: Path
    db_path: Path
    database_url: str
    network: str
    model: str
    model_provider: str
    model_base_url: str
    model_timeout: float
    profile: str


def load_settings(**explicit: Unpack[ExplicitSettings]) -> NibSettings:
    """Load and validate settings; raises AgentConfigError with source and fix on a bad value."""
    path = config_path()
    try:
        return NibSettings(**explicit)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            env_name = "NIB_" + "__".join(str(p) for p in err["loc"]).upper()
            hint = ""
            if err["type"] == "extra_forbidden":  # a key nib does not read: name the nearest
                nearest = dict(unknown_keys(_nested(err["loc"]))).get(loc)
                hint = f" (did you mean {nearest}?)" if nearest else ""
            problems.append(f"{loc}={err.get('input')!r}: {err['msg']}{hint}")
        where = f"{path}" if path.exists() else "the environment"
        raise AgentConfigError(
            f"invalid configuration in {where} or NIB_* variables: {'; '.join(problems)}. "
            f"Fix: correct {', '.join(p.split('=')[0] for p in problems)} in {path} or "
            f"the matching NIB_* variable (e.g. {env_name}).",
            source=str(path),
        ) from exc


#: NIB_* variables read outside NibSettings: each by the one module named.
OTHER_VARIABLES = {
    "NIB_CONFIG": "this module: where config.toml is",
    "NIB_ANVIL": "chain.devnet: the anvil binary",
    "NIB_IMPORT_KEY": "nib wallet import: the key, instead of stdin",
    "NIB_JUDGE_ADMIN_TOKEN": "the judge service: its admin token (on its stdin)",
    "NIB_SECRETS_ON_STDIN": "a service: its secrets come on stdin",
    "NIB_WALLET_SOCKET": "the red-team tests: the wallet's socket",
    "NIB_TEST_ATTACK": "the red-team tests: the attack a planted hook runs",
}


def _nested(loc: tuple[int | str, ...]) -> dict[str, object]:
    """A config key's location (``("limits", "max_step")``) as the table it came from."""
    data: dict[str, object] = {}
    for part in reversed([str(p) for p in loc]):
        data = {part: data or None}
    return data


def known_variables() -> set[str]:
    """Every NIB_* variable nib reads: one per setting, one per limit
    (``NIB_LIMITS__MAX_STEPS``), and OTHER_VARIABLES."""
    names = {f"NIB_{name.upper()}" for name, f in NibSettings.model_fields.items()
             if f.validation_alias is None and name != "limits"}
    names |= {f"NIB_{name.upper()}" for name in RENAMED_SETTINGS}
    limits = [f.name for f in dataclasses.fields(Limits)] + list(RENAMED)
    names |= {f"NIB_LIMITS__{name.upper()}" for name in limits}
    return names | set(OTHER_VARIABLES)


def _nearest(name: str, known: set[str]) -> str | None:
    found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_variables(env: dict[str, str] | None = None) -> list[tuple[str, str | None]]:
    """The NIB_* variables in ``env`` that nib does not read, each with the nearest known
    one (a typo such as NIB_MODEL_PROVIDR would otherwise be ignored without a word)."""
    env = dict(os.environ) if env is None else env
    known = known_variables()
    return [(k, _nearest(k, known)) for k in sorted(env) if k.startswith("NIB_") and k not in known]


def unknown_keys(data: dict[str, object]) -> list[tuple[str, str | None]]:
    """The keys of a config file's table ``data`` (and of its [limits]) nib does not read,
    each with the nearest known one."""
    top = set(NibSettings.model_fields) - {"plain_openai_api_key", "plain_anthropic_api_key"}
    top |= set(RENAMED_SETTINGS)
    limits = {f.name for f in dataclasses.fields(Limits)} | set(RENAMED)
    found = [(k, _nearest(k, top)) for k in sorted(data) if k not in top]
    sub = data.get("limits")
    if isinstance(sub, dict):
        found += [(f"limits.{k}", (lambda n: f"limits.{n}" if n else None)(_nearest(k, limits)))
                  for k in sorted(sub) if k not in limits]
    return found

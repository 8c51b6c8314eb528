"""Limits, profiles and configuration (TOML + NIB_* variables)."""

from __future__ import annotations

import dataclasses
from dataclasses import fields
from pathlib import Path

import pytest

from agent.config import (
    LimitOverrides,
    config_path,
    load_settings,
    unknown_keys,
    unknown_variables,
)
from agent.errors import AgentConfigError
from agent.loop.limits import (
    PROFILES,
    PROVENANCE,
    RENAMED,
    Limits,
    default_profile,
    limits_for,
    run_limits,
)
from agent.report.page import run_from_store
from chain.money import gas_to_usdc


def test_defaults_match_the_design() -> None:
    lim = Limits()
    assert (lim.max_steps, lim.wall_clock_s, lim.spend_cap_atomic, lim.max_tokens) == (
        6,
        600.0,
        1_000_000,
        120_000,
    )
    assert (
        lim.max_consecutive_failures,
        lim.duplicate_nudges,
        lim.replan_every,
        lim.malformed_retries,
        lim.batch_max_calls,
        lim.checklist_max_items,
    ) == (3, 1, 3, 1, 3, 5)


def test_every_limit_has_provenance() -> None:
    assert {f.name for f in fields(Limits)} == set(PROVENANCE)
    assert all(len(v) > 10 for v in PROVENANCE.values())


def test_gas_counts_against_the_cap_in_usdc() -> None:
    assert gas_to_usdc(10**18, 3_000) == 3_000_000_000  # 1 ETH of gas = 3000 USDC
    assert gas_to_usdc(1, 3_000) == 1 and gas_to_usdc(0, 3_000) == 0  # rounds up


def test_profiles_and_default_by_model_location() -> None:
    assert set(PROFILES) == {"cost-optimized", "quality-first", "local-guarded"}
    assert default_profile(True) == "local-guarded" and default_profile(False) == "cost-optimized"
    local = PROFILES["local-guarded"]
    assert local.max_tokens > Limits().max_tokens and local.streak_length < Limits().streak_length
    assert limits_for(None, model_local=True)[0] == "local-guarded"
    name, lim = limits_for("quality-first", model_local=True, max_steps=9, wall_clock_s=None)
    assert name == "quality-first" and lim.max_steps == 9 and lim.wall_clock_s == 1200.0


def test_a_run_records_the_profile_it_applies_and_custom_only_when_a_value_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outside tester's `nib run --demo` (the offline planner, no model configured)
    recorded profile `custom`: the command resolved the limits from the settings and the
    loop named any limits it was handed `custom`. The profile applied is recorded by name."""
    import asyncio

    from _loop_support import FactTool, make_deps

    from agent.loop.run import run_task
    from agent.models.offline import OfflinePlanner

    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    local = load_settings().resolve_limits(model_local=True)
    assert local[0] == "local-guarded"
    assert run_limits(*local, model_local=True) == local
    assert run_limits(None, None, model_local=False) == ("cost-optimized", Limits())
    # An override equal to the profile's own value changes nothing; any other is custom.
    same = load_settings().resolve_limits(model_local=True, max_steps=10)
    assert run_limits(*same, model_local=True)[0] == "local-guarded"
    fewer = load_settings().resolve_limits(model_local=True, max_steps=3)
    assert run_limits(*fewer, model_local=True) == ("custom", fewer[1])
    capped = load_settings().resolve_limits(model_local=True, spend_cap_atomic=500_000)
    assert run_limits(*capped, model_local=True)[0] == "custom"
    # A configured profile is named as the flag's is, whatever the model.
    monkeypatch.setenv("NIB_PROFILE", "quality-first")
    chosen = load_settings().resolve_limits(model_local=True)
    assert run_limits(*chosen, model_local=True) == ("quality-first", PROFILES["quality-first"])

    base_fee = FactTool("base_fee", {"base_fee_gwei": "1.5"})
    # Limits handed over without their profile's name: named by where the model runs.
    for (profile, limits), recorded in [(local, "local-guarded"), ((None, local[1]), "local-guarded"),
                                        (fewer, "custom"), (chosen, "quality-first")]:
        deps = make_deps(tmp_path, OfflinePlanner(), [base_fee], profile=profile, limits=limits)  # type: ignore[arg-type]
        r = asyncio.run(run_task("What is the base fee?", deps))
        assert r.profile == recorded and deps.store.run(r.run_id)["profile"] == recorded  # type: ignore[index]
        start = deps.store.events(r.run_id, "run.start")[0]["data"]
        assert start["profile"] == recorded and start["limits"] == limits.as_dict()


def test_bad_profile_and_limits_say_the_fix() -> None:
    with pytest.raises(AgentConfigError, match="profile 'fast' is unknown; expected one of"):
        limits_for("fast")
    with pytest.raises(AgentConfigError, match="max_steps=0 is not allowed.*Fix: set max_steps"):
        Limits(max_steps=0)
    # The default it names is each profile's, not one (an offline run uses local-guarded's
    # 10 steps; the message used to say "default 6").
    with pytest.raises(AgentConfigError, match=r"own \(cost-optimized 6, quality-first 12, "
                       r"local-guarded 10\)"):
        limits_for("local-guarded", max_steps=-1)
    with pytest.raises(AgentConfigError, match="unknown limit"):
        limits_for(None, max_stepz=3)


def test_config_from_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "nib.toml"
    cfg.write_text('profile = "quality-first"\nnetwork = "anvil"\n[limits]\nmax_steps = 8\n')
    monkeypatch.setenv("NIB_CONFIG", str(cfg))
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.setenv("NIB_LIMITS__MAX_TOKENS", "50000")
    s = load_settings()
    assert s.profile == "quality-first" and s.database == tmp_path / "nib.db"
    name, lim = s.resolve_limits(model_local=False)
    assert (name, lim.max_steps, lim.max_tokens) == ("quality-first", 8, 50_000)
    monkeypatch.setenv("NIB_LIMITS__MAX_STEPS", "4")  # env beats the file
    assert load_settings().resolve_limits(model_local=False)[1].max_steps == 4
    # an explicit flag beats both
    assert load_settings().resolve_limits(model_local=False, max_steps=2)[1].max_steps == 2
    assert load_settings().resolve_limits(model_local=False, profile="local-guarded")[0] == (
        "local-guarded"
    )


def test_every_limit_can_be_overridden() -> None:
    assert set(LimitOverrides.model_fields) == {f.name for f in dataclasses.fields(Limits)}


def test_config_path_defaults_to_home(tmp_path: Path) -> None:
    assert config_path({"NIB_HOME": str(tmp_path)}) == tmp_path / "config.toml"


def test_malformed_toml_names_file_and_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("profile = quality-first\n")
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    with pytest.raises(AgentConfigError) as info:
        load_settings()
    msg = str(info.value)
    assert str(cfg) in msg and "not valid TOML" in msg and "Fix:" in msg
    assert info.value.source == str(cfg)


def test_invalid_values_name_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('profile = "turbo"\n[limits]\nmax_steps = -1\n')
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    with pytest.raises(AgentConfigError) as info:
        load_settings()
    msg = str(info.value)
    assert "profile='turbo'" in msg and "limits.max_steps=-1" in msg and "Fix:" in msg
    cfg.write_text("[limits]\nmax_stepz = 3\n")
    with pytest.raises(AgentConfigError, match="max_stepz"):
        load_settings()


def test_per_call_cap_and_approval_threshold_follow_the_spend_cap_unless_set():
    from agent.loop.limits import limits_for

    _, five = limits_for(spend_cap_atomic=5_000_000)
    assert (five.per_call_cap_atomic, five.approval_threshold_atomic) == (1_250_000, 2_500_000)
    _, default = limits_for()
    assert (default.per_call_cap_atomic, default.approval_threshold_atomic) == (250_000, 500_000)
    _, pinned = limits_for(spend_cap_atomic=5_000_000, per_call_cap_atomic=3_000_000)
    assert (pinned.per_call_cap_atomic, pinned.approval_threshold_atomic) == (3_000_000, 2_500_000)


def test_unknown_variables_and_config_keys_name_the_nearest_known_one():
    from agent.config import unknown_keys, unknown_variables

    found = unknown_variables({"NIB_MODEL_PROVIDR": "openai", "NIB_HOME": "/x", "PATH": "/bin"})
    assert found == [("NIB_MODEL_PROVIDR", "NIB_MODEL_PROVIDER")]
    assert unknown_keys({"profil": "x", "limits": {"max_step": 3}}) == [
        ("profil", "profile"), ("limits.max_step", "limits.max_steps")]


def test_a_renamed_limit_still_reads_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Amounts in atomic USDC end ``_atomic``; spend_cap_usdc and its two siblings were
    renamed. A config file, a NIB_LIMITS__ variable, a paused run's saved limits and a
    recorded run's run.start event written under the old names still read, with the
    precedence of each source kept (a variable under either name beats the file)."""
    assert RENAMED == {
        "spend_cap_usdc": "spend_cap_atomic",
        "per_call_cap_usdc": "per_call_cap_atomic",
        "approval_threshold_usdc": "approval_threshold_atomic",
    }
    cfg = tmp_path / "nib.toml"
    cfg.write_text("[limits]\nspend_cap_usdc = 5000000\napproval_threshold_usdc = 0\n")
    monkeypatch.setenv("NIB_CONFIG", str(cfg))
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    lim = load_settings().resolve_limits(model_local=False)[1]
    assert (lim.spend_cap_atomic, lim.per_call_cap_atomic, lim.approval_threshold_atomic) == (
        5_000_000, 1_250_000, 0
    )
    monkeypatch.setenv("NIB_LIMITS__PER_CALL_CAP_USDC", "7")
    monkeypatch.setenv("NIB_LIMITS__SPEND_CAP_ATOMIC", "9")
    lim = load_settings().resolve_limits(model_local=False)[1]
    assert (lim.spend_cap_atomic, lim.per_call_cap_atomic) == (9, 7)
    cfg.write_text("[limits]\nspend_cap_atomic = 5000000\n")
    monkeypatch.delenv("NIB_LIMITS__SPEND_CAP_ATOMIC")
    monkeypatch.setenv("NIB_LIMITS__SPEND_CAP_USDC", "11")
    assert load_settings().resolve_limits(model_local=False)[1].spend_cap_atomic == 11
    # Neither `nib config`'s unknown-key warning nor its unknown-variable one flags them.
    assert unknown_keys({"limits": {"spend_cap_usdc": 1}}) == []
    assert unknown_variables({"NIB_LIMITS__SPEND_CAP_USDC": "1"}) == []
    # A paused run saved before the rename resumes with its own limits.
    saved = {**Limits().as_dict(), "max_steps": 3}
    for old, new in RENAMED.items():
        saved[old] = saved.pop(new) + 1
    resumed = Limits.from_saved(saved)
    assert (resumed.max_steps, resumed.spend_cap_atomic) == (3, Limits().spend_cap_atomic + 1)
    assert resumed.approval_threshold_atomic == Limits().approval_threshold_atomic + 1
    # A run recorded before the rename is drawn against its own cap in the report.
    event = {"seq": 1, "type": "run.start", "data": {"limits": {"spend_cap_usdc": 42, "max_steps": 2}}}
    run = run_from_store({"run_id": "r", "result": "{}"}, [event])
    assert (run["spend_cap_atomic"], run["max_steps"]) == (42, 2)
    # Code that still says the old name is told the new one.
    with pytest.raises(AgentConfigError, match="spend_cap_usdc is now spend_cap_atomic"):
        limits_for(spend_cap_usdc=1)


def test_the_renamed_treasury_cap_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NIB_TREASURY_CAP_USDC and a ``treasury_cap_usdc`` key (atomic USDC, since renamed
    treasury_cap_atomic) still set the treasury cap; a variable under either name beats
    the file under either name, and neither name is reported as unknown."""
    cfg = tmp_path / "nib.toml"
    cfg.write_text("treasury_cap_usdc = 5000000\n")
    monkeypatch.setenv("NIB_CONFIG", str(cfg))
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    assert load_settings().treasury_cap_atomic == 5_000_000
    monkeypatch.setenv("NIB_TREASURY_CAP_USDC", "7")
    assert load_settings().treasury_cap_atomic == 7
    cfg.write_text("treasury_cap_atomic = 5000000\n")
    assert load_settings().treasury_cap_atomic == 7
    monkeypatch.setenv("NIB_TREASURY_CAP_ATOMIC", "9")
    assert load_settings().treasury_cap_atomic == 9
    assert unknown_keys({"treasury_cap_usdc": 1}) == []
    assert unknown_variables({"NIB_TREASURY_CAP_USDC": "1", "NIB_TREASURY_CAP_ATOMIC": "1"}) == []

"""Learning from one executed call: the audit, the executed set (and the failed-for-good
set), evidence, checklist coverage, spend and the counters the progress detectors read."""

from __future__ import annotations

from agent.jsonvalues import as_list
from agent.loop.context import RunContext
from agent.loop.history import one_line
from agent.loop.result import EvidenceItem
from agent.loop.state import FailedForGood
from agent.tools.base import Observation, Tool

__all__ = ["Learning"]


class Learning:
    """Records what each executed call taught the run."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def record(self, tool: Tool, norm: dict[str, object], fp: str, obs: Observation) -> None:
        """Record one executed call: audit, executed set, evidence, coverage, counters."""
        run, st = self.run, self.run.state
        st.attempted.append(fp)
        run.emit(
            "tool.call",
            {
                "step": st.step,
                "tool": tool.name,
                "args": norm,
                "fingerprint": fp,
                "ok": obs.ok,
                "cost_usdc": obs.cost_usdc,
                "gas_wei": obs.gas_wei,
                "summary": one_line(obs.summary),
                # What was bought (a bounded typed excerpt) and what discovery listed.
                **({"excerpt": obs.data["excerpt"]} if obs.data.get("excerpt") else {}),
                **({"offers": _offer_rows(obs.data["offers"])} if obs.data.get("offers") else {}),
            },
        )
        if obs.cost_usdc or obs.gas_wei:
            self._spent(tool, obs)
        if not obs.ok:
            self._failed(tool, norm, fp, obs)
            return
        st.consecutive_failures = 0
        st.executed[fp] = st.step
        eid = f"e{len(st.evidence) + 1}"
        params = tool.fact_params(norm, obs)
        st.evidence.append(
            EvidenceItem(
                id=eid,
                step=st.step,
                tool=tool.name,
                args=norm,
                summary=one_line(obs.summary),
                facts=dict(obs.facts),
                params=params,
                cost_usdc=obs.cost_usdc,
                excerpt=obs.data.get("excerpt"),
                offers=_offer_rows(obs.data["offers"]) if obs.data.get("offers") else None,
            )
        )
        run.add_history(tool.name, norm, "ok", obs.summary, eid)
        self._cover(tool, obs, params, eid)
        st.successful_tools.append(tool.name)
        facts = " ".join(f"{k}={v}" for k, v in sorted(obs.facts.items()))
        st.signatures.append(f"{obs.summary} {facts}")

    def _failed(self, tool: Tool, norm: dict[str, object], fp: str, obs: Observation) -> None:
        """A failed call: counted against the failure budget and shown to the model. One
        that can never pass (``retry == "never"``) joins the failed-for-good set, which
        the duplicate gate keeps from running again; any other stays retryable."""
        st = self.run.state
        st.consecutive_failures += 1
        why = one_line(obs.error or obs.summary)
        if obs.retry == "never":
            st.failed_for_good[fp] = FailedForGood(step=st.step, why=why)
            self.run.add_history(
                tool.name, norm, "failed-for-good", obs.error or obs.summary,
                error_class=obs.error_class, http_status=obs.http_status,
            )
            st.feedback.append(
                f"{tool.name} failed: {why} (this exact call can never pass in this run: "
                "retrying it will not help and it is not run again; change what made it "
                "fail, e.g. another seller or other arguments, or answer without it)"
            )
            return
        self.run.add_history(
            tool.name, norm, "failed", obs.error or obs.summary,
            error_class=obs.error_class, http_status=obs.http_status,
        )
        st.feedback.append(
            f"{tool.name} failed: {why} (failures are retryable; fix the cause first)"
        )

    def _spent(self, tool: Tool, obs: Observation) -> None:
        st = self.run.state
        st.spend_usdc += obs.cost_usdc
        st.gas_wei += obs.gas_wei
        self.run.emit(
            "spend",
            {
                "step": st.step,
                "tool": tool.name,
                "usdc": obs.cost_usdc,
                "gas_wei": obs.gas_wei,
                "total_usdc": st.spend_usdc,
                "total_gas_wei": st.gas_wei,
            },
        )

    def _cover(self, tool: Tool, obs: Observation, params: dict[str, str], eid: str) -> None:
        """Mark the checklist items this evidence covers (same kind, same parameters; an
        absent parameter means its default); audit the newly covered ones."""
        run = self.run
        before = {i.id for i in run.checklist.covered}
        deps = run.deps
        defaults = {
            **tool.param_defaults(),
            "token": deps.network.usdc or "",
            "address": deps.wallet_address or getattr(deps.wallet, "address", None) or "",
        }
        read_at = obs.data.get("block_number") if tool.reads_block else None
        first, last = obs.data.get("from_block"), obs.data.get("to_block")
        scanned = tool.reads_range and isinstance(first, int) and isinstance(last, int)
        span = f"{first}..{last}" if scanned else None
        after = run.checklist.cover(obs.facts, eid, params=params, defaults=defaults,
                                    read_at=None if read_at is None else str(read_at),
                                    read_range=span)
        run.state.checklist = after.as_dicts()
        newly = [i.id for i in after.covered if i.id not in before]
        if newly:
            run.emit("coverage", {"step": run.state.step, "covered": newly, "evidence": eid})


def _offer_rows(offers: object) -> list[dict[str, object]]:
    """Discovery (or an MCP server's tool list) as the audit keeps it: what, where, how
    much, for which kinds, and what an MCP tool's call needs."""
    keep = ("resource", "method", "tool", "price", "kinds", "allowlisted")
    return [
        {k: o.get(k) for k in keep} | ({"inputs": o["inputs"]} if "inputs" in o else {})
        for o in as_list(offers)
        if isinstance(o, dict)
    ]

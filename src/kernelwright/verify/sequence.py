"""The candidate job's messages, judged as a sequence (integrity #31, #32).

The candidate's process can write anything to its report channel, so no single message proves anything: the
harness in that process sends a fixed sequence, and a message anywhere else is a ``protocol-violation``.

    device · weights? · cuda_build* · ( trial_start(i) · kernels(i = the profiled trial)? · trial(i) )  for i in plan
    · [ phase(timing) · timing ]  (GPU) · phase(instructions) · ( cubin | binary )* · error? · lock_wait? · done

Notes and findings may come anywhere before ``done`` (a finding only ever makes a verdict worse); nothing may come
after it. A second message of a kind sent once, a trial other than the plan's next one, a kernel list outside the
profiled trial, a timing outside its phase: each is named. What a pass depends on and the sequence lacks — a
trial, the kernel list, the timing, the instruction phase and a compiled kernel for every own kernel that ran —
is listed by :func:`missing_evidence`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ANYWHERE = {"note", "finding"}


@dataclass
class _State:
    plan: list[int]
    profile_trial: int | None
    expects_timing: bool
    position: int = 0  # the plan's next trial
    in_trial: int | None = None
    phase: str | None = None  # None (trials), "timing", "instructions"
    seen: set[str] = field(default_factory=set)
    ended: bool = False  # done, or an error: only lock_wait and done may follow an error
    errors: list[str] = field(default_factory=list)

    def once(self, event: str) -> bool:
        if event in self.seen:
            self.errors.append(f"a second {event!r} message: the harness sends one")
            return False
        self.seen.add(event)
        return True

    def wrong(self, event: str, why: str) -> None:
        self.errors.append(f"a {event!r} message {why}")

    @property
    def trials_done(self) -> bool:
        return self.position >= len(self.plan) and self.in_trial is None


def sequence_errors(messages: Sequence[Mapping[str, Any]], *, plan: Sequence[int], profile_trial: int | None,
                    expects_timing: bool) -> list[str]:
    """Why ``messages`` (the candidate job's, in the order they came) are not a sequence its harness sends; empty
    when they are. ``plan``: the trials the job was given, in order."""
    state = _State(plan=list(plan), profile_trial=profile_trial, expects_timing=expects_timing)
    for message in messages:
        event = str(message.get("event"))
        if "done" in state.seen:
            state.wrong(event, "after 'done'")
            continue
        if event in ANYWHERE:
            continue
        if event == "done":
            if "error" not in state.seen and state.phase != "instructions":
                state.wrong(event, "before the job's end (the harness says it after the instruction phase)")
            state.seen.add("done")
            continue
        if event == "lock_wait":
            state.once(event)
            continue
        if "error" in state.seen:
            state.wrong(event, "after the job's error")
            continue
        _step(state, event, message)
    return state.errors


def _step(state: _State, event: str, message: Mapping[str, Any]) -> None:
    index = message.get("index")
    if event == "error":
        state.once(event)
    elif event == "device":
        if state.once(event) and (state.position or state.in_trial is not None):
            state.wrong(event, "after the trials began")
    elif event == "weights":
        if state.once(event) and ("device" not in state.seen or state.position or state.in_trial is not None):
            state.wrong(event, "outside the model's construction")
    elif event == "cuda_build" or (event == "cubin" and message.get("name") is None):
        if state.phase == "timing":  # built without a GPU, where it is built (construction, a forward)
            state.wrong(event, "while being timed")
    elif event == "trial_start":
        expected = state.plan[state.position] if state.position < len(state.plan) else None
        if state.in_trial is not None or state.phase is not None or index != expected:
            state.wrong(event, f"for trial {index} where the plan's next was {expected}")
        else:
            state.in_trial = index
    elif event == "kernels":
        if state.in_trial is None or state.in_trial != state.profile_trial:
            state.wrong(event, f"outside the profiled trial {state.profile_trial}")
        state.once(event)
    elif event == "trial":
        if state.in_trial is None or index != state.in_trial:
            state.wrong(event, f"for trial {index}, which had not started")
        else:
            state.in_trial = None
            state.position += 1
    elif event == "phase":
        _phase(state, str(message.get("name")))
    elif event == "timing":
        if state.phase != "timing" or not state.once(event):
            state.wrong(event, "outside the timing phase")
    elif event in ("cubin", "binary"):
        if state.phase != "instructions":
            state.wrong(event, "before the instruction phase")
    else:
        state.wrong(event, "the candidate's job never sends")


def _phase(state: _State, name: str) -> None:
    if name == "timing":
        if not state.expects_timing or state.phase is not None or not state.trials_done:
            state.wrong("phase", "'timing' out of place")
        state.phase = "timing"
    elif name == "instructions":
        ready = state.trials_done and (not state.expects_timing or "timing" in state.seen)
        if state.phase == "instructions" or not ready:
            state.wrong("phase", "'instructions' out of place")
        state.phase = "instructions"
    else:
        state.wrong("phase", f"{name!r}, a phase the job does not have")


def missing_evidence(messages: Sequence[Mapping[str, Any]], *, plan: Sequence[int], profile_trial: int | None,
                     expects_timing: bool, inspect_archs: Sequence[str], native: bool) -> list[str]:
    """What a pass depends on that the job did not report: each planned trial, the profiled trial's kernel list,
    the timing (GPU), the instruction phase and, for every own Triton kernel that ran, its compiled kernel for
    each arch (``native``: the one that ran) or a note on why there is none."""
    events = [str(m.get("event")) for m in messages]
    reported = {m.get("index") for m in messages if m.get("event") == "trial"}
    missing = [f"trial {i}" for i in plan if i not in reported]
    if profile_trial is not None and profile_trial in reported and "kernels" not in events:
        missing.append(f"the kernel list of trial {profile_trial}")
    if expects_timing and "timing" not in events:
        missing.append("timing")
    if missing:
        return missing
    if not any(m.get("event") == "phase" and m.get("name") == "instructions" for m in messages):
        return ["the instruction summary (its phase never began)"]
    ran = sorted({name for m in messages if m.get("event") == "trial"
                  for name in (m.get("triton_launches") or {})})
    cubins = {(m.get("name"), m.get("arch")) for m in messages if m.get("event") == "cubin"}
    noted = " ".join(str(m.get("message", "")) for m in messages if m.get("event") == "note")
    archs = [*inspect_archs, *(["native"] if native else [])]
    for name in ran:
        for arch in archs:
            if (name, arch) not in cubins and name not in noted:
                missing.append(f"the compiled {name} for {arch}")
    return missing

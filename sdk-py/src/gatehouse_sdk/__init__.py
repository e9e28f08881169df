"""gatehouse SDK for Python: small helpers over the WIT contract (wit/gatehouse.wit).

An adapter's app module defines ``class WitWorld(Adapter)`` with one method per capability; a
policy's defines ``class WitWorld(Policy)`` with ``decide``. ``python -m gatehouse_sdk.build``
turns the module into a component with componentize-py, which generates the ``wit_world``
bindings these helpers use. HTTP for adapters is in ``gatehouse_sdk.http``.
"""

import json as _json
from typing import Any, Dict, List, Optional

from componentize_py_types import Err
from wit_world.imports import log as _log

try:  # the adapter world also imports wasi:http's `types`, so the bindings rename ours
    from wit_world.imports import gatehouse_plugin_types as types
except ImportError:
    from wit_world.imports import types

__all__ = [
    "Adapter",
    "Policy",
    "ToolFailure",
    "abstain",
    "allow",
    "deny",
    "json_result",
    "log",
    "mask_pii",
    "redact",
    "require_approval",
    "skill_context",
    "text_result",
    "types",
]


class log:
    """Log lines into the call's trace (bounded by the host per call)."""

    @staticmethod
    def trace(message: str) -> None:
        _log.log(_log.Level.TRACE, str(message))

    @staticmethod
    def debug(message: str) -> None:
        _log.log(_log.Level.DEBUG, str(message))

    @staticmethod
    def info(message: str) -> None:
        _log.log(_log.Level.INFO, str(message))

    @staticmethod
    def warn(message: str) -> None:
        _log.log(_log.Level.WARN, str(message))

    @staticmethod
    def error(message: str) -> None:
        _log.log(_log.Level.ERROR, str(message))


class ToolFailure(Exception):
    """A structured failure of a capability; raised from a handler, it becomes the WIT
    ``tool-error`` the host reports. ``kind`` is one of ``validation``, ``not_found``,
    ``conflict``, ``upstream``, ``unavailable``, ``internal``."""

    def __init__(
        self,
        kind: str,
        code: str,
        message: str,
        retryable: bool = False,
        remediation: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.message = message
        self.retryable = retryable
        self.remediation = remediation

    def to_wit(self) -> "types.ToolError":
        return types.ToolError(
            kind=types.ErrorKind[self.kind.upper()],
            code=self.code,
            message=self.message,
            retryable=self.retryable,
            remediation=self.remediation,
        )


def text_result(*texts: str) -> "types.ToolOutput":
    """A result of text content blocks."""
    return types.ToolOutput(
        content=[types.Content_Text(str(t)) for t in texts],
        structured=None,
        evidence_refs=[],
    )


def json_result(
    value: Any, text: Optional[str] = None, evidence: Optional[List[str]] = None
) -> "types.ToolOutput":
    """A result whose structured content is ``value`` (checked by the host against the
    capability's output schema), with the same JSON as its text block unless ``text`` is
    given."""
    structured = _json.dumps(value, separators=(",", ":"))
    return types.ToolOutput(
        content=[types.Content_Text(text if text is not None else structured)],
        structured=structured,
        evidence_refs=[str(e) for e in evidence or []],
    )


def skill_context(ctx: "types.CallContext") -> Optional[str]:
    """The operator's context text resolved for this call (skills), if any."""
    return ctx.skill_context


# The reserved capability id `gatehouse pack` asks the handled ids with.
_HANDLES_PROBE = "gatehouse:handles"


class Adapter:
    """Base of an adapter's ``WitWorld``: ``invoke`` calls the method named after the
    capability (``-`` read as ``_``) with the parsed arguments and the call context. A
    method returns a result (``json_result``, ``text_result``) or raises ``ToolFailure``;
    any other exception is reported as an ``internal`` failure with its message."""

    def invoke(self, ctx: "types.CallContext", capability: str, args: str) -> "types.ToolOutput":
        if capability == _HANDLES_PROBE:
            # `gatehouse pack` asks which capability ids this code handles (no id has a `:`),
            # to check them against manifest.toml; no handler runs.
            own = [
                name
                for name in dir(type(self))
                if not name.startswith("_")
                and name not in dir(Adapter)
                and callable(getattr(type(self), name))
            ]
            return json_result({"handles": own})
        handler = getattr(type(self), capability.replace("-", "_"), None)
        if capability.startswith("_") or handler is None or capability == "invoke":
            raise Err(
                ToolFailure(
                    "validation",
                    "UNKNOWN_CAPABILITY",
                    f"this adapter has no capability `{capability}`",
                ).to_wit()
            )
        try:
            parsed = _json.loads(args)
        except ValueError as e:
            raise Err(
                ToolFailure("validation", "INVALID_ARGUMENTS", f"the arguments are not JSON: {e}").to_wit()
            )
        try:
            return handler(self, parsed, ctx)
        except ToolFailure as failure:
            raise Err(failure.to_wit())
        except Err:
            raise
        except Exception as e:  # a bug in the adapter: report it, do not trap
            raise Err(ToolFailure("internal", "ADAPTER_ERROR", f"{type(e).__name__}: {e}").to_wit())


def _decision(
    verdict: "types.Verdict",
    reasons: Optional[List["types.Reason"]] = None,
    effective_mode: Optional["types.ApprovalMode"] = None,
    evidence: Optional[List[str]] = None,
    obligations: Optional[List[Any]] = None,
) -> "types.Decision":
    return types.Decision(
        verdict=verdict,
        effective_mode=effective_mode,
        reasons=list(reasons or []),
        evidence_refs=[str(e) for e in evidence or []],
        obligations=list(obligations or []),
    )


def allow(**options: Any) -> "types.Decision":
    """Allow the call. Options: ``reasons``, ``effective_mode``, ``evidence``, ``obligations``."""
    return _decision(types.Verdict.ALLOW, **options)


def deny(code: str, message: str, **options: Any) -> "types.Decision":
    """Deny the call (``POLICY_BLOCKED``), with a reason."""
    reasons = [types.Reason(code=code, message=message)] + list(options.pop("reasons", []))
    return _decision(types.Verdict.DENY, reasons=reasons, **options)


def require_approval(code: str, message: str, **options: Any) -> "types.Decision":
    """Pause the call until an approver decides (``paused``), with a reason."""
    reasons = [types.Reason(code=code, message=message)] + list(options.pop("reasons", []))
    return _decision(types.Verdict.REQUIRE_APPROVAL, reasons=reasons, **options)


def abstain() -> "types.Decision":
    """No opinion: the next module, or the operator's default, decides."""
    return _decision(types.Verdict.ABSTAIN)


def redact(pointer: str) -> Any:
    """Obligation: replace the value at this JSON pointer of the structured result with
    ``"[REDACTED]"``."""
    return types.Obligation_RedactPointer(pointer)


def mask_pii(*kinds: str) -> Any:
    """Obligation: mask ``email`` and/or ``phone`` occurrences in every text of the result."""
    return types.Obligation_MaskPii([types.PiiKind[k.upper()] for k in kinds])


class Policy:
    """Base of a policy's ``WitWorld``: ``evaluate`` calls ``decide(action, args, config)``
    with the action, its arguments and the binding's config parsed (``{}`` when empty). An
    exception denies: the host fails closed."""

    def evaluate(self, action: "types.Action", config: str) -> "types.Decision":
        parsed: Dict[str, Any] = _json.loads(config) if config else {}
        return self.decide(action, _json.loads(action.args), parsed)

    def decide(self, action: "types.Action", args: Any, config: Dict[str, Any]) -> "types.Decision":
        raise NotImplementedError("a policy's WitWorld defines decide(action, args, config)")

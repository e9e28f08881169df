"""gatehouse SDK for Python: small helpers over the WIT contract (wit/gatehouse.wit,
gatehouse:plugin@0.8.0).

An adapter's app module defines ``class WitWorld(Adapter)`` with one method per capability,
and, if it serves them, ``resource`` (resources), ``prompt`` (prompts) and ``suggest``
(completions); while a call runs it tells and asks its caller through ``caller``. A policy's
defines ``class WitWorld(Policy)`` with ``decide``. ``build.py`` turns the module into a
component with componentize-py, which generates the ``wit_world`` bindings these helpers use.
HTTP for adapters is in ``gatehouse_sdk.http``.
"""

import json as _json
from typing import Any, Dict, List, Optional, Union

from componentize_py_types import Err, Ok
from wit_world.imports import log as _log

try:  # a policy's world has no caller to tell or ask
    from wit_world.imports import caller as _caller
except ImportError:
    _caller = None

try:  # the adapter world also imports wasi:http's `types`, so the bindings rename ours
    from wit_world.imports import gatehouse_plugin_types as types
except ImportError:
    from wit_world.imports import types

__all__ = [
    "Adapter",
    "AskFailure",
    "Policy",
    "ToolFailure",
    "abstain",
    "allow",
    "ask",
    "assistant_message",
    "blob_resource",
    "caller",
    "deny",
    "json_result",
    "log",
    "mask_identifiers",
    "mask_pii",
    "mask_secrets",
    "redact",
    "require_approval",
    "skill_context",
    "text_resource",
    "text_result",
    "types",
    "user_message",
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


class AskFailure(Exception):
    """Why an ask of the caller has no answer. ``reason`` is ``unavailable`` (nobody to ask),
    ``not-supported`` (the caller did not declare it can answer this), ``refused`` (the
    gateway refused before asking: manifest, operator grant, budget, a credential),
    ``failed`` (the caller answered with an error or hung up) or ``timeout``. Raised out of a
    handler, it becomes the tool error ``CALLER_UNAVAILABLE``, ``CALLER_NOT_SUPPORTED``,
    ``ASK_REFUSED``, ``ASK_FAILED`` or ``ASK_TIMEOUT``."""

    _AS_FAILURE = {
        "unavailable": ("unavailable", "CALLER_UNAVAILABLE", "call the tool from a client that can answer it"),
        "not-supported": (
            "unavailable",
            "CALLER_NOT_SUPPORTED",
            "call the tool from a client that declares this capability",
        ),
        "refused": ("internal", "ASK_REFUSED", "ask the operator to grant it in [[caller.grant]]"),
        "failed": ("upstream", "ASK_FAILED", "try again"),
        "timeout": ("unavailable", "ASK_TIMEOUT", "call again and answer in time"),
    }

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def to_tool_failure(self) -> ToolFailure:
        kind, code, remediation = self._AS_FAILURE.get(self.reason, self._AS_FAILURE["failed"])
        return ToolFailure(kind, code, self.message, remediation=remediation)


def _ask_failure(error: Any) -> AskFailure:
    if isinstance(error, _caller.AskError_Timeout):
        return AskFailure("timeout", f"the caller did not answer within {error.value} s")
    reason = {
        _caller.AskError_Unavailable: "unavailable",
        _caller.AskError_NotSupported: "not-supported",
        _caller.AskError_Refused: "refused",
    }.get(type(error), "failed")
    return AskFailure(reason, str(error.value))


class ask:
    """Questions for ``caller.ask``, each named by a ``key`` unique in the call (1-64 of
    ``[A-Za-z0-9_.-]``)."""

    @staticmethod
    def form(key: str, message: str, schema: Dict[str, Any]) -> Dict[str, Any]:
        """A form for the user: ``message``, and ``schema``, the object schema of the fields
        asked. The answer: ``{"action": "accept" | "decline" | "cancel", "content": {...}}``."""
        return {"key": key, "kind": "elicitation", "params": {"message": message, "requestedSchema": schema}}

    @staticmethod
    def url(key: str, message: str, url: str, elicitation_id: str) -> Dict[str, Any]:
        """A URL for the user to open, under ``elicitation_id``."""
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        return {"key": key, "kind": "elicitation", "params": params}

    @staticmethod
    def sample(key: str, prompt: str, max_tokens: int) -> Dict[str, Any]:
        """A completion of ``prompt`` by the caller's model, of at most ``max_tokens``. The
        answer: ``{"role", "content", "model"}``."""
        messages = [{"role": "user", "content": {"type": "text", "text": prompt}}]
        return {"key": key, "kind": "sampling", "params": {"messages": messages, "maxTokens": max_tokens}}

    @staticmethod
    def roots(key: str) -> Dict[str, Any]:
        """The caller's roots. The answer: ``{"roots": [{"uri", "name"}]}``."""
        return {"key": key, "kind": "roots", "params": {}}


class caller:
    """What the adapter tells and asks its caller while a call runs (the contract's ``caller``
    interface). Each use must be declared in the manifest's ``[caller]`` table (``progress``,
    ``log``, ``ask``); an ask must also be granted by the operator (``[[caller.grant]]``),
    within its budgets."""

    @staticmethod
    def can() -> Any:
        """What the caller declared it can be asked: ``elicit_form``, ``elicit_url``,
        ``sample``, ``roots``."""
        return _caller.can()

    @staticmethod
    def progress(progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Progress of the call: ``progress`` of ``total`` (if known), with a ``message``."""
        _caller.progress(float(progress), None if total is None else float(total), message)

    @staticmethod
    def notify(level: str, data: Any, logger: Optional[str] = None) -> None:
        """A log line for the caller at ``level`` (MCP's: ``debug`` to ``emergency``);
        ``data`` any JSON."""
        _caller.notify(_caller.LogLevel[level.upper()], logger, _json.dumps(data))

    @staticmethod
    def ask(question: Dict[str, Any]) -> Any:
        """Asks one question (``ask.form``, ``ask.url``, ``ask.sample``, ``ask.roots``) and
        waits: the answer (MCP's result), or a raised ``AskFailure``."""
        [answer] = caller.ask_all([question])
        if isinstance(answer, AskFailure):
            raise answer
        return answer

    @staticmethod
    def ask_all(questions: List[Dict[str, Any]]) -> List[Any]:
        """Asks several questions at once (the caller gets them together) and waits for every
        answer, in order: each an answer or an ``AskFailure``."""
        asked = [
            _caller.InputRequest(
                key=q["key"], kind=_caller.AskKind[q["kind"].upper()], params=_json.dumps(q.get("params", {}))
            )
            for q in questions
        ]
        answers: List[Any] = []
        for answer in _caller.ask_all(asked):
            if isinstance(answer, Ok):
                try:
                    answers.append(_json.loads(answer.value))
                except ValueError as e:
                    answers.append(AskFailure("failed", f"the answer is not JSON: {e}"))
            else:
                answers.append(_ask_failure(answer.value))
        return answers


def text_resource(uri: str, text: str, mime_type: Optional[str] = None) -> "types.EmbeddedResource":
    """A resource's contents as text, for ``Adapter.resource``."""
    return types.EmbeddedResource(uri=uri, mime_type=mime_type, text=str(text), data=None)


def blob_resource(uri: str, data: bytes, mime_type: Optional[str] = None) -> "types.EmbeddedResource":
    """A resource's contents as bytes, for ``Adapter.resource``."""
    return types.EmbeddedResource(uri=uri, mime_type=mime_type, text=None, data=bytes(data))


def user_message(content: Union[str, Any]) -> "types.PromptMessage":
    """A prompt's message of the user's: text, or a content block."""
    return types.PromptMessage(role=types.Role.USER, content=_block(content))


def assistant_message(content: Union[str, Any]) -> "types.PromptMessage":
    """A prompt's message of the assistant's: text, or a content block."""
    return types.PromptMessage(role=types.Role.ASSISTANT, content=_block(content))


def _block(content: Union[str, Any]) -> Any:
    return types.Content_Text(content) if isinstance(content, str) else content


def _failure(e: BaseException) -> Err:
    """What a handler raised, as the ``tool-error`` the host reports."""
    if isinstance(e, Err):
        return e
    if isinstance(e, ToolFailure):
        return Err(e.to_wit())
    if isinstance(e, AskFailure):
        return Err(e.to_tool_failure().to_wit())
    return Err(ToolFailure("internal", "ADAPTER_ERROR", f"{type(e).__name__}: {e}").to_wit())


# The reserved capability id `gatehouse pack` asks the handled ids with.
_HANDLES_PROBE = "gatehouse:handles"


class Adapter:
    """Base of an adapter's ``WitWorld``: ``invoke`` calls the method named after the
    capability (``-`` read as ``_``) with the parsed arguments and the call context. A
    method returns a result (``json_result``, ``text_result``) or raises ``ToolFailure``;
    an ``AskFailure`` it does not catch becomes its tool error, and any other exception is
    reported as an ``internal`` failure with its message.

    An adapter that serves resources, prompts or completions overrides ``resource``,
    ``prompt`` and ``suggest``; the host calls them only for what its manifest declares
    (``[[resource]]``, ``[[resource_template]]``, ``[[prompt]]``), after its gates. No
    capability may be named after a method of this class."""

    def resource(self, uri: str, ctx: "types.CallContext") -> Any:
        """The contents at ``uri`` (a ``text_resource`` or ``blob_resource``, or a list of
        them); ``ctx.upstream`` is the manifest entry's ``upstream`` table (JSON). Default:
        not found."""
        raise ToolFailure("not_found", "RESOURCE_NOT_FOUND", f"this adapter serves no resource at `{uri}`")

    def prompt(self, name: str, args: Dict[str, str], ctx: "types.CallContext") -> Any:
        """Prompt ``name`` filled in with ``args`` (strings, checked against the declared
        arguments): its messages (``user_message``, ``assistant_message``), or
        ``(description, messages)``. Default: not found."""
        raise ToolFailure("not_found", "PROMPT_NOT_FOUND", f"this adapter serves no prompt `{name}`")

    def suggest(
        self, reference: Dict[str, str], argument: str, value: str, context: Dict[str, str], ctx: "types.CallContext"
    ) -> Any:
        """Values for ``argument`` of ``reference`` (``{"prompt": id}`` or ``{"resource":
        uri_template}``), given the ``value`` typed so far and the arguments already given
        (``context``): a list of strings, or ``(values, total, has_more)``. Default: none."""
        return []

    def read_resource(self, ctx: "types.CallContext", uri: str) -> List["types.EmbeddedResource"]:
        try:
            contents = self.resource(uri, ctx)
        except Exception as e:
            raise _failure(e)
        return list(contents) if isinstance(contents, (list, tuple)) else [contents]

    def get_prompt(self, ctx: "types.CallContext", name: str, args: str) -> "types.Prompt":
        try:
            filled = self.prompt(name, _json.loads(args), ctx)
        except Exception as e:
            raise _failure(e)
        if isinstance(filled, tuple):
            description, messages = filled
            return types.Prompt(description=description, messages=list(messages))
        return types.Prompt(description=None, messages=list(filled))

    def complete(
        self, ctx: "types.CallContext", reference: Any, argument: str, value: str, context: str
    ) -> "types.Completion":
        on = (
            {"prompt": reference.value}
            if isinstance(reference, types.CompletionRef_Prompt)
            else {"resource": reference.value}
        )
        try:
            given = _json.loads(context)
        except ValueError:
            given = {}
        try:
            found = self.suggest(on, argument, value, given, ctx)
        except Exception as e:
            raise _failure(e)
        if isinstance(found, tuple):
            values, total, has_more = found
            return types.Completion(values=[str(v) for v in values], total=total, has_more=bool(has_more))
        return types.Completion(values=[str(v) for v in found], total=None, has_more=False)

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
        reserved = capability.replace("-", "_") in dir(Adapter)
        if capability.startswith("_") or handler is None or reserved:
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
        except Exception as e:  # a failure, or a bug in the adapter: report it, do not trap
            raise _failure(e)


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


def mask_secrets(*kinds: str, fields: Optional[List[str]] = None) -> Any:
    """Obligation: mask secrets of these kinds (``private_key``, ``cloud_access_key``,
    ``bearer_token``, ``jwt``, ``high_entropy``) in the result and in the arguments as the
    host keeps them; ``fields`` name the JSON keys whose high-entropy values are secrets."""
    kinds_ = [types.SecretKind[k.replace("-", "_").upper()] for k in kinds]
    return types.Obligation_MaskSecrets(types.SecretScan(kinds=kinds_, fields=list(fields or [])))


def mask_identifiers(**patterns: str) -> Any:
    """Obligation: mask what each named pattern matches as ``[NAME]``, in the same places:
    ``mask_identifiers(order="ord_[0-9]+")``."""
    return types.Obligation_MaskIdentifiers(
        [types.Identifier(name=name, pattern=pattern) for name, pattern in patterns.items()]
    )


class Policy:
    """Base of a policy's ``WitWorld``: ``evaluate`` calls ``decide(action, args, config)``
    with the action, its arguments and the binding's config parsed (``{}`` when empty). An
    exception denies: the host fails closed."""

    def evaluate(self, action: "types.Action", config: str) -> "types.Decision":
        parsed: Dict[str, Any] = _json.loads(config) if config else {}
        return self.decide(action, _json.loads(action.args), parsed)

    def decide(self, action: "types.Action", args: Any, config: Dict[str, Any]) -> "types.Decision":
        raise NotImplementedError("a policy's WitWorld defines decide(action, args, config)")

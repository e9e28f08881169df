"""A policy: denies calls whose arguments mention a forbidden word, sends those that mention a
review word to an approver, and redacts the structured result's `message` when the arguments
mention a secret word. Everything else is allowed."""

import json

from gatehouse_sdk import Policy, allow, deny, mask_identifiers, redact, require_approval, types


class WitWorld(Policy):
    def decide(self, action, args, config):
        text = json.dumps(args).lower()
        deny_word = config.get("deny_word", "forbidden")
        approval_word = config.get("approval_word", "refund")
        redact_word = config.get("redact_word", "secret")
        if deny_word in text:
            return deny("FORBIDDEN_WORD", f"the arguments mention `{deny_word}`")
        if approval_word in text:
            return require_approval(
                "NEEDS_REVIEW", f"the arguments mention `{approval_word}`; an approver decides"
            )
        if redact_word in text:
            return allow(
                reasons=[types.Reason("REDACTED", f"the result's message mentions `{redact_word}`")],
                obligations=[redact("/message")],
            )
        # Order ids never reach the caller or the audit log.
        return allow(
            reasons=[types.Reason("ALLOWED", f"{action.adapter_id}.{action.capability_id} is allowed")],
            obligations=[mask_identifiers(order="ord_[0-9]+")],
        )

// A policy: denies calls whose arguments mention a forbidden word, sends those that mention a
// review word to an approver, and redacts the structured result's `message` when the
// arguments mention a secret word. Everything else is allowed.
import { allow, deny, obligations, policy, requireApproval } from '@gatehouse/sdk';

interface Config {
  deny_word?: string;
  approval_word?: string;
  redact_word?: string;
}

export const evaluate = policy((action, config: Config) => {
  const text = JSON.stringify(action.args).toLowerCase();
  const { deny_word = 'forbidden', approval_word = 'refund', redact_word = 'secret' } = config;
  if (text.includes(deny_word)) {
    return deny('FORBIDDEN_WORD', `the arguments mention \`${deny_word}\``);
  }
  if (text.includes(approval_word)) {
    return requireApproval('NEEDS_REVIEW', `the arguments mention \`${approval_word}\`; an approver decides`);
  }
  if (text.includes(redact_word)) {
    return allow({
      reasons: [{ code: 'REDACTED', message: `the result's message mentions \`${redact_word}\`` }],
      obligations: [obligations.redact('/message')],
    });
  }
  // Order ids never reach the caller or the audit log.
  return allow({
    reasons: [{ code: 'ALLOWED', message: `${action.adapterId}.${action.capabilityId} is allowed` }],
    obligations: [obligations.maskIdentifiers({ order: 'ord_[0-9]+' })],
  });
});

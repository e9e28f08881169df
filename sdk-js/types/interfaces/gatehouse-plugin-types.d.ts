declare module 'gatehouse:plugin/types@0.8.0' {
  /**
   * The kind of operation a capability performs (spec 000, "Capability classification").
   * # Variants
   * 
   * ## `"observe"`
   * 
   * Inspect external state without mutation.
   * ## `"recall"`
   * 
   * Read from a governed memory or knowledge store.
   * ## `"think-support"`
   * 
   * Computational helper producing structured output, no I/O.
   * ## `"act"`
   * 
   * Produce an external side effect.
   * ## `"verify"`
   * 
   * Validate a claim against external truth without mutation.
   */
  export type CapabilityClass = 'observe' | 'recall' | 'think-support' | 'act' | 'verify';
  /**
   * Risk tier of a call, lowest first (spec 000, "Approval-mode binding").
   * # Variants
   * 
   * ## `"read-only"`
   * 
   * ## `"local-write"`
   * 
   * ## `"network"`
   * 
   * ## `"delegated"`
   * 
   * ## `"destructive"`
   */
  export type ApprovalMode = 'read-only' | 'local-write' | 'network' | 'delegated' | 'destructive';
  /**
   * # Variants
   * 
   * ## `"user"`
   * 
   * ## `"agent"`
   * 
   * ## `"service"`
   */
  export type PrincipalKind = 'user' | 'agent' | 'service';
  /**
   * One link of the principal chain (user -> agent -> service).
   */
  export interface Principal {
    kind: PrincipalKind,
    id: string,
    tenant: string,
  }
  /**
   * What the host tells an adapter about the call in flight.
   */
  export interface CallContext {
    toolCallId: string,
    traceId: string,
    tenant: string,
    principals: Array<Principal>,
    /**
     * Effective approval mode for this call: never above the capability's declared maximum.
     */
    approvalMode: ApprovalMode,
    /**
     * Present on write-class calls; the host also sends it upstream as `Idempotency-Key`.
     */
    idempotencyKey?: string,
    /**
     * Operator-declared context text resolved for this call (skills), if any.
     */
    skillContext?: string,
    /**
     * The capability's `upstream` table from the signed manifest, as a JSON document, if it
     * declares one: where a generic adapter (one `gatehouse import` wrote the manifest for)
     * forwards this capability. Signed with the manifest, so it is what the operator reviewed.
     */
    upstream?: string,
  }
  /**
   * Binary content with its media type.
   */
  export interface Blob {
    data: Uint8Array,
    mimeType: string,
  }
  /**
   * An MCP embedded resource: text or binary contents behind a URI.
   */
  export interface EmbeddedResource {
    uri: string,
    mimeType?: string,
    text?: string,
    data?: Uint8Array,
  }
  /**
   * One MCP content block.
   */
  export type Content = ContentText | ContentImage | ContentAudio | ContentResource;
  export interface ContentText {
    tag: 'text',
    val: string,
  }
  export interface ContentImage {
    tag: 'image',
    val: Blob,
  }
  export interface ContentAudio {
    tag: 'audio',
    val: Blob,
  }
  export interface ContentResource {
    tag: 'resource',
    val: EmbeddedResource,
  }
  /**
   * Who speaks a prompt's message (MCP's `Role`), 0.6.0.
   * # Variants
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   */
  export type Role = 'user' | 'assistant';
  /**
   * One message of a prompt (0.6.0).
   */
  export interface PromptMessage {
    role: Role,
    content: Content,
  }
  /**
   * A prompt filled in with its arguments (MCP's `GetPromptResult`), 0.6.0.
   */
  export interface Prompt {
    description?: string,
    messages: Array<PromptMessage>,
  }
  /**
   * What a completion completes (MCP's `ref/prompt` and `ref/resource`), 0.6.0.
   */
  export type CompletionRef = CompletionRefPrompt | CompletionRefResource;
  /**
   * An argument of the prompt of this name (as the manifest declares it).
   */
  export interface CompletionRefPrompt {
    tag: 'prompt',
    val: string,
  }
  /**
   * A parameter of the resource template of this URI template (as the manifest declares it).
   */
  export interface CompletionRefResource {
    tag: 'resource',
    val: string,
  }
  /**
   * Suggested values for an argument (MCP's `completion`), 0.6.0: at most 100.
   */
  export interface Completion {
    values: Array<string>,
    /**
     * How many values there are in all, if known.
     */
    total?: number,
    /**
     * Whether there are more than `values`.
     */
    hasMore: boolean,
  }
  /**
   * A successful tool result.
   */
  export interface ToolOutput {
    /**
     * Content blocks for the model.
     */
    content: Array<Content>,
    /**
     * Structured result as a JSON document; checked against the capability's output schema.
     */
    structured?: string,
    /**
     * References to the evidence this result rests on (ids, payload hashes, source URIs).
     */
    evidenceRefs: Array<string>,
  }
  /**
   * # Variants
   * 
   * ## `"validation"`
   * 
   * The arguments are wrong; the model can correct them.
   * ## `"not-found"`
   * 
   * The thing asked for does not exist.
   * ## `"conflict"`
   * 
   * The request conflicts with the current state.
   * ## `"upstream"`
   * 
   * The external system failed.
   * ## `"unavailable"`
   * 
   * The external system is unavailable right now.
   * ## `"internal"`
   * 
   * The adapter itself failed.
   */
  export type ErrorKind = 'validation' | 'not-found' | 'conflict' | 'upstream' | 'unavailable' | 'internal';
  /**
   * A structured failure reported by an adapter.
   */
  export interface ToolError {
    kind: ErrorKind,
    /**
     * Machine-readable code, e.g. `ORDER_NOT_FOUND`.
     */
    code: string,
    message: string,
    retryable: boolean,
    /**
     * What the caller can do about it.
     */
    remediation?: string,
  }
  /**
   * A risk signal attached to an action by the host (AARM `risk_signals`).
   */
  export interface RiskSignal {
    name: string,
    score: number,
  }
  /**
   * One earlier call of the caller's session, as the host's audit log records it (0.7.0).
   */
  export interface PriorAction {
    /**
     * The tool called: `<adapter id>.<capability id>`.
     */
    tool: string,
    /**
     * The call's id.
     */
    toolCallId: string,
    /**
     * When its audit entry was written, milliseconds since the Unix epoch (UTC).
     */
    atUnixMs: bigint,
    /**
     * The labels its result brought to the session: those the session first held after it.
     * A label the session already held is not repeated; a label that joined through an action
     * older than `prior-actions` reaches is in `data-classification` only.
     */
    labels: Array<string>,
  }
  /**
   * Context a policy may use; everything time-dependent comes from the host so
   * that a recorded decision replays exactly.
   */
  export interface ActionContext {
    /**
     * Host time when the call entered the pipeline, milliseconds since the Unix epoch (UTC).
     */
    nowUnixMs: bigint,
    /**
     * The latest calls of the caller's session (its MCP session, the trace its requests
     * carry, or its window: docs/sessions.md), oldest first, each with the labels it brought
     * (at most `[sessions] actions`, default 16). Before 0.7.0, their tool names.
     */
    priorActions: Array<PriorAction>,
    /**
     * The labels the session's results brought so far (`private`, `untrusted`, `secret`,
     * `pii:email`...), in the order they joined; for a resource read, also the resource's
     * reviewed classification.
     */
    dataClassification: Array<string>,
    /**
     * The names of the skills resolved for this call, in the order their texts reach the
     * adapter as `call-context.skill-context` (0.4.0).
     */
    skills: Array<string>,
    /**
     * What the called tool can do with data (`external`: it can send data outside), as its
     * manifest's `sends` declares and the operator's `[[sessions.label]]` raises it (0.7.0).
     * With `data-classification`, what a flow rule such as the lethal trifecta judges.
     */
    sends: Array<string>,
    /**
     * How the call reached the gateway (0.8.0): `mcp` (an MCP `tools/call`, a resource read
     * or a prompt), `a2a` (an A2A `SendMessage`), or `direct` (a host embedding gatehouse, or
     * `gatehouse call`). A call resumed after its approval keeps its own.
     */
    protocol: string,
    /**
     * The call this one was made on behalf of (0.8.0): a peer the gateway called (an A2A
     * agent) called back with the delegation it was given. Its id; the principal chain then
     * starts with that call's principals, and this call runs at most at that call's mode.
     */
    delegatedBy?: string,
  }
  /**
   * What the host admitted about the caller when it identified it, beyond its id (0.4.0):
   * from a verified JWT, the claims the operator names (`[mcp.jwt] roles_claim` and
   * `groups_claim`); from an API key, the `roles` and `groups` its entry declares. Empty
   * when the caller has none. A policy may trust them: the host never takes them from the
   * call's arguments or metadata.
   */
  export interface Claims {
    roles: Array<string>,
    groups: Array<string>,
  }
  /**
   * The normalized action a policy evaluates (AARM action schema).
   */
  export interface Action {
    toolCallId: string,
    adapterId: string,
    capabilityId: string,
    capabilityClass: CapabilityClass,
    /**
     * The capability's declared maximum approval mode.
     */
    approvalModeMax: ApprovalMode,
    /**
     * The call's risk mode: the declared maximum as lowered by earlier policies. The mode a
     * caller asks for never lowers it (it only narrows what the adapter may do once it runs),
     * so rules keyed to risk read this field.
     */
    approvalModeRequested: ApprovalMode,
    /**
     * The call's arguments as a JSON document.
     */
    args: string,
    principals: Array<Principal>,
    tenant: string,
    /**
     * The calling principal's admitted claims (0.4.0).
     */
    claims: Claims,
    context: ActionContext,
    riskSignals: Array<RiskSignal>,
  }
  /**
   * # Variants
   * 
   * ## `"allow"`
   * 
   * ## `"deny"`
   * 
   * ## `"require-approval"`
   * 
   * ## `"abstain"`
   */
  export type Verdict = 'allow' | 'deny' | 'require-approval' | 'abstain';
  export interface Reason {
    code: string,
    message: string,
  }
  /**
   * # Variants
   * 
   * ## `"email"`
   * 
   * ## `"phone"`
   */
  export type PiiKind = 'email' | 'phone';
  /**
   * Kinds of secret the host finds in text (0.3.0).
   * # Variants
   * 
   * ## `"private-key"`
   * 
   * A PEM private key block (`-----BEGIN ... PRIVATE KEY-----`), whole.
   * ## `"cloud-access-key"`
   * 
   * A cloud access key id or API key: AWS (`AKIA...`, `ASIA...`), Google (`AIza...`).
   * ## `"bearer-token"`
   * 
   * A bearer token: `Bearer <token>`, and tokens of a known shape (GitHub `ghp_...`,
   * `github_pat_...`, Slack `xox?-...`).
   * ## `"jwt"`
   * 
   * A JSON Web Token (`eyJ....eyJ....sig`).
   * ## `"high-entropy"`
   * 
   * A high-entropy string (20+ characters, 3.5+ bits each) as the value of a named field.
   */
  export type SecretKind = 'private-key' | 'cloud-access-key' | 'bearer-token' | 'jwt' | 'high-entropy';
  /**
   * What `mask-secrets` looks for (0.3.0).
   */
  export interface SecretScan {
    kinds: Array<SecretKind>,
    /**
     * The fields (JSON object keys, compared without case) whose high-entropy string
     * values are secrets; used by `high-entropy`.
     */
    fields: Array<string>,
  }
  /**
   * An identifier an operator names, masked as `[NAME]` (0.3.0).
   */
  export interface Identifier {
    /**
     * Upper-cased into the mask: `customer-id` masks as `[CUSTOMER-ID]`.
     */
    name: string,
    /**
     * A regular expression (Rust `regex` syntax, linear time) for the identifier.
     */
    pattern: string,
  }
  /**
   * Something the host must do to the result before delivering it, and, for the masks,
   * to the call's arguments wherever the host keeps or shows them.
   */
  export type Obligation = ObligationRedactPointer | ObligationMaskPii | ObligationMaskSecrets | ObligationMaskIdentifiers;
  /**
   * Replace the value at this JSON pointer of the structured result with `"[REDACTED]"`.
   */
  export interface ObligationRedactPointer {
    tag: 'redact-pointer',
    val: string,
  }
  /**
   * Mask occurrences of these kinds of personal data in every text of the result.
   */
  export interface ObligationMaskPii {
    tag: 'mask-pii',
    val: Array<PiiKind>,
  }
  /**
   * Mask the secrets found in every text of the result as `[SECRET:<kind>]` (the kind in
   * snake case: `[SECRET:private_key]`), and in the
   * call's arguments as the audit log, the logs and the approval view keep them (the
   * adapter still gets the arguments as sent: to stop a call, deny it). What was found
   * (kind and place, never the value) goes into the decision record (0.3.0).
   */
  export interface ObligationMaskSecrets {
    tag: 'mask-secrets',
    val: SecretScan,
  }
  /**
   * Mask matches of these identifiers as `[NAME]`, in the same places as `mask-secrets`
   * (0.3.0).
   */
  export interface ObligationMaskIdentifiers {
    tag: 'mask-identifiers',
    val: Array<Identifier>,
  }
  /**
   * A policy module's answer.
   */
  export interface Decision {
    verdict: Verdict,
    /**
     * Lower the call's approval mode to this. The host ignores any attempt to raise it.
     */
    effectiveMode?: ApprovalMode,
    reasons: Array<Reason>,
    evidenceRefs: Array<string>,
    obligations: Array<Obligation>,
  }
}

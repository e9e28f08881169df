//! `test.ledger`: an adapter for pipeline tests. Nothing here moves money; each capability
//! returns a fixed shape so tests can check the gates around it.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};

struct Ledger;

impl Adapter for Ledger {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        let args = call.args_value()?;
        match call.capability() {
            "transfer" => {
                let note = args.get("note").and_then(|v| v.as_str()).unwrap_or("");
                Ok(ToolOutput::text(format!("transferred; note: {note}"))
                    .with_structured(json!({
                        "transfer_id": "tr_1",
                        "amount": args["amount"],
                        "note": note,
                        "skill_context": ctx.skill_context,
                    }))
                    .with_evidence("ledger:tr_1"))
            }
            "reverse" | "purge" | "close_account" => Ok(ToolOutput::text("done")),
            "bad_output" => {
                Ok(ToolOutput::text("oops").with_structured(json!({ "count": "many" })))
            }
            "no_evidence" => Ok(ToolOutput::text("ok").with_structured(json!({ "status": "ok" }))),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

gatehouse_sdk::export_adapter!(Ledger);

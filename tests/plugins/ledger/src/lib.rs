//! `test.ledger`: an adapter for pipeline tests. Nothing here moves money; each capability
//! returns a fixed shape so tests can check the gates around it.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Adapter, Call, CallContext, Content, EmbeddedResource, ToolError, ToolOutput};

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
            "statement" => Ok(ToolOutput::json(&json!({
                "iban": "DE89370400440532013000",
                "holder": "ann@example.com",
            }))?
            .with_content(Content::Resource(
                EmbeddedResource::text(
                    "mailto:ann@example.com",
                    "holder ann@example.com, account DE89370400440532013000",
                )
                .with_mime_type("text/plain"),
            ))
            .with_evidence("account:DE89370400440532013000")
            .with_evidence("holder:ann@example.com")),
            "reject" => Err(ToolError::upstream(
                "UPSTREAM_REJECTED",
                "upstream said: 403 {\"detail\":\"account of ann@example.com is frozen\"}",
            )),
            "no_evidence" => Ok(ToolOutput::text("ok").with_structured(json!({ "status": "ok" }))),
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

gatehouse_sdk::export_adapter!(Ledger);

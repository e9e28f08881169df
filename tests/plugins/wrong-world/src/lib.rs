//! `test.wrong-world`: a component of the `policy` world whose manifest says
//! `kind = "adapter"`. It exports `evaluate` and no `invoke`, so the host must refuse to load
//! it as an adapter.

use gatehouse_sdk::serde_json::Value;
use gatehouse_sdk::{Action, Decision, Policy};

struct WrongWorld;

impl Policy for WrongWorld {
    type Config = Value;

    fn evaluate(_action: &Action, _config: &Value) -> Decision {
        Decision::abstain()
    }
}

gatehouse_sdk::export_policy!(WrongWorld);

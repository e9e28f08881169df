//! `gatehouse.openapi`: each capability is one HTTP operation of a service an OpenAPI document
//! describes.
//!
//! The component's code is the same for every import. What differs is the signed manifest
//! `gatehouse import openapi` writes: one capability per operation, each with an `upstream`
//! table ([`mapping::Mapping`]: method, URL template, where each parameter goes, whether a
//! JSON body is sent) that the host hands over with every call. So per call:
//! 1. read the capability's mapping from the call context ([`mapping`]);
//! 2. build the request from the call's arguments ([`request`]): path parameters into the URL
//!    template (percent-encoded), query parameters (arrays repeated, or comma-joined where
//!    the document says `explode: false`), header parameters, and the `body` argument as the
//!    JSON body; send it through `gatehouse_sdk::http`, so the egress gate decides where it
//!    may go and injects the operator's credentials;
//! 3. turn the answer into the result ([`response`]): a 2xx answer is structured content
//!    `{ "status", "body" }` (the body parsed when it is JSON); any other status is the
//!    structured error `HTTP_<status>` quoting the answer, retryable for 408, 425, 429 and 5xx
//!    but 501 and 505 (`gatehouse_sdk::http::retryable_status`) with the
//!    `Retry-After` in the remediation.

use gatehouse_sdk::{Adapter, Call, CallContext, Result, ToolOutput};

mod mapping;
mod request;
mod response;

struct OpenApi;

impl Adapter for OpenApi {
    fn invoke(ctx: &CallContext, call: &Call) -> Result<ToolOutput> {
        let mapping = mapping::Mapping::of(ctx, call.capability())?;
        let request = request::build(&mapping, &call.args_value()?)?;
        response::output(&mapping, &request.send()?)
    }
}

gatehouse_sdk::export_adapter!(OpenApi);

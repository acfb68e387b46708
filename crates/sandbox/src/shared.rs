//! What the sandbox's port implementations share: tag matching, not-found errors, records read as port types.

use serde_json::Value;

use super::{Res, Sandbox};
use cloud::*;

pub(super) fn tags_of(data: &Value) -> Tags {
    serde_json::from_value(data.get("tags").cloned().unwrap_or(Value::Null)).unwrap_or_default()
}

pub(super) fn has_tags(data: &Value, want: &Tags) -> bool {
    let tags = tags_of(data);
    want.iter().all(|(k, v)| tags.get(k) == Some(v))
}

pub(super) fn not_found(service: &str, op: &str, code: &str, what: &str) -> CloudError {
    CloudError::new(service, op, code, format!("{what} does not exist"))
}

pub(super) fn vpc_of(res: &Res) -> Vpc {
    Vpc {
        id: res.id.clone(),
        cidrs: serde_json::from_value(res.data["cidrs"].clone()).unwrap_or_default(),
        tags: tags_of(&res.data),
    }
}

pub(super) fn subnet_of(res: &Res) -> Option<Subnet> {
    Some(Subnet {
        id: res.id.clone(),
        vpc_id: res.data["vpcId"].as_str()?.to_string(),
        cidr: res.data["cidr"].as_str()?.parse().ok()?,
        zone: res.data["zone"].as_str()?.to_string(),
        tags: tags_of(&res.data),
    })
}

impl Sandbox {
    pub(super) async fn require(
        &self,
        kind: &str,
        id: &str,
        api: &str,
        code: &str,
    ) -> CloudResult<Res> {
        let (service, op) = super::split_api(api);
        match self.get(kind, id).await? {
            Some(r) if r.deleted_ms.is_none() => Ok(r),
            _ => Err(not_found(service, op, code, &format!("{kind} '{id}'"))),
        }
    }
}

//! Signing in with an AWS identity: what a sign-in token must be before anyone asks STS about it,
//! who signed it once STS has answered, and the port that asks.
//!
//! The token is the one `aws eks get-token --cluster-name <deployment>` prints: `k8s-aws-v1.` and
//! the base64url (unpadded) of an STS `GetCallerIdentity` URL presigned with SigV4, with the
//! header `x-k8s-aws-id: <deployment>` among the signed ones. The rules below are the ones
//! `kubernetes-sigs/aws-iam-authenticator` applies before it sends such a URL
//! (`pkg/token/token.go` at 0221afb8e2a5d14a20a93473edc4c2aa7676ce95, `Verify`): at most 4 KiB,
//! the prefix, `https`, a host of the partition's STS endpoints, path `/`, only the query
//! parameters of a presigned call and each once, `Action=GetCallerIdentity`, the deployment
//! header signed, `X-Amz-Expires` within 0–900, and no later than 15 minutes after
//! `X-Amz-Date` (STS honours a presigned `GetCallerIdentity` for 15 minutes whatever
//! `X-Amz-Expires` says). STS itself then checks the signature, so a token made for another
//! deployment (its header signed with another value) is refused there.

use async_trait::async_trait;
use base64::Engine as _;
use serde::Serialize;

use crate::CloudResult;

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// The header that names the deployment the token was made for.
pub const DEPLOYMENT_HEADER: &str = "x-k8s-aws-id";
const MAX_TOKEN_BYTES: usize = 4096;
/// How long STS honours a presigned `GetCallerIdentity` after its `X-Amz-Date`.
pub const TOKEN_LIFETIME_SECS: i64 = 15 * 60;
const PARAMETERS: &[&str] = &[
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
];

/// A sign-in token that passed the rules: the call to send to STS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedCall {
    /// The URL as presigned (`https://sts.<region>.amazonaws.com/?Action=…`).
    pub url: String,
    pub host: String,
    /// `X-Amz-Signature`: what makes this token this token (a replay has the same one).
    pub signature: String,
    pub access_key_id: String,
    /// When STS stops honouring it (seconds since the epoch).
    pub expires_at: i64,
}

/// Who signed a token, as STS says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignInIdentity {
    /// As STS returned it (`arn:aws:sts::111122223333:assumed-role/Dev/alice`).
    pub arn: String,
    /// The IAM principal it stands for (`arn:aws:iam::111122223333:role/Dev`): what access
    /// entries and the administrators list name.
    pub principal_arn: String,
    pub account: String,
    pub user_id: String,
    /// The role session's name (`alice`), when it is a role session.
    pub session_name: Option<String>,
}

/// Whether `host` is an STS endpoint of `partition` (`aws`, `aws-cn`, `aws-us-gov`): the global
/// one, a regional one or a FIPS one, as the SDK's endpoint tables list them.
pub fn is_sts_host(partition: &str, host: &str) -> bool {
    let (suffix, prefix) = match partition {
        "aws-cn" => (".amazonaws.com.cn", "cn-"),
        "aws-us-gov" => (".amazonaws.com", "us-gov-"),
        _ => (".amazonaws.com", ""),
    };
    if partition == "aws" && host == "sts.amazonaws.com" {
        return true;
    }
    let Some(rest) = host.strip_suffix(suffix) else {
        return false;
    };
    let Some(region) = rest
        .strip_prefix("sts.")
        .or_else(|| rest.strip_prefix("sts-fips."))
    else {
        return false;
    };
    let mut parts = region.split('-');
    let shape_ok = region.split('-').count() >= 3
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric()))
        && region
            .rsplit('-')
            .next()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
    let in_partition = if prefix.is_empty() {
        !region.starts_with("cn-") && !region.starts_with("us-gov-")
    } else {
        region.starts_with(prefix)
    };
    shape_ok && in_partition
}

/// Applies the rules to a token (see the module docs) at `now` (seconds since the epoch).
pub fn check_token(token: &str, partition: &str, now: i64) -> Result<PresignedCall, String> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err("the token is longer than 4 KiB".into());
    }
    let encoded = token
        .strip_prefix(TOKEN_PREFIX)
        .ok_or_else(|| format!("the token does not start with `{TOKEN_PREFIX}`"))?;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or("the token is not base64url text")?;
    let rest = url
        .strip_prefix("https://")
        .ok_or("the token's URL is not https")?;
    let (authority, path_query) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.to_ascii_lowercase();
    if !is_sts_host(partition, &host) {
        return Err(format!(
            "the token's URL goes to `{}`, not to an STS endpoint of partition {partition}",
            host.chars().take(80).collect::<String>()
        ));
    }
    let query = path_query
        .strip_prefix("/?")
        .ok_or("the token's URL has a path other than `/` or no query")?;
    let mut params = std::collections::BTreeMap::new();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(k).to_ascii_lowercase();
        if !PARAMETERS.contains(&k.as_str()) {
            return Err(format!(
                "the token's URL carries parameter `{}`, which a presigned GetCallerIdentity does not",
                k.chars().take(40).collect::<String>()
            ));
        }
        if params.insert(k, decode(v)).is_some() {
            return Err("the token's URL repeats a parameter".into());
        }
    }
    let get = |k: &str| params.get(k).map(String::as_str).unwrap_or_default();
    if get("action") != "GetCallerIdentity" {
        return Err("the token's URL does not call GetCallerIdentity".into());
    }
    if !get("x-amz-signedheaders")
        .split(';')
        .any(|h| h.eq_ignore_ascii_case(DEPLOYMENT_HEADER))
    {
        return Err(format!(
            "the token does not sign the {DEPLOYMENT_HEADER} header: make it with `aws eks get-token --cluster-name <deployment>`"
        ));
    }
    match get("x-amz-expires").parse::<i64>() {
        Ok(0..=900) => {}
        _ => return Err("the token's X-Amz-Expires is not within 0–900 seconds".into()),
    }
    let signed_at = parse_amz_date(get("x-amz-date"))
        .ok_or("the token's X-Amz-Date is missing or malformed")?;
    let expires_at = signed_at + TOKEN_LIFETIME_SECS;
    if now > expires_at {
        return Err(
            "the token has expired (a token is good for 15 minutes): make a new one".into(),
        );
    }
    let signature = get("x-amz-signature").to_string();
    if signature.is_empty() {
        return Err("the token's URL is not signed".into());
    }
    Ok(PresignedCall {
        access_key_id: get("x-amz-credential")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string(),
        url,
        host,
        signature,
        expires_at,
    })
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .to_string()
}

/// `20060102T150405Z` as seconds since the epoch.
fn parse_amz_date(s: &str) -> Option<i64> {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let at = time::PrimitiveDateTime::parse(s, &format).ok()?;
    Some(at.assume_utc().unix_timestamp())
}

/// The IAM principal an STS ARN stands for, as aws-iam-authenticator canonicalises it
/// (`pkg/arn/arn.go`): an assumed-role session becomes its role (without the path, which STS
/// does not return), a user or a role stays itself.
pub fn principal_arn(arn: &str) -> Result<String, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [_, partition, service, _, account, resource] = parts[..] else {
        return Err(format!("`{arn}` is not an ARN"));
    };
    match (service, resource.split_once('/')) {
        ("sts", Some(("assumed-role", rest))) => {
            let role = rest.split('/').next().unwrap_or_default();
            Ok(format!("arn:{partition}:iam::{account}:role/{role}"))
        }
        ("iam", Some(("user" | "role", _))) => Ok(arn.to_string()),
        _ => Err(format!(
            "`{arn}` is neither a user, a role nor a role session"
        )),
    }
}

/// Asks STS who signed a presigned `GetCallerIdentity`.
#[async_trait]
pub trait Identity: Send + Sync {
    /// Sends the call with the deployment header and returns the caller; STS's refusal (an
    /// unknown key, a bad signature, a token made for another deployment) is an error whose
    /// code is STS's.
    async fn who_signed(
        &self,
        call: &PresignedCall,
        deployment: &str,
    ) -> CloudResult<SignInIdentity>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(url: &str) -> String {
        format!(
            "{TOKEN_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
        )
    }

    const GOOD: &str = "https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20231114%2Fus-west-2%2Fsts%2Faws4_request&X-Amz-Date=20231114T221320Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=11ae";
    const SIGNED_AT: i64 = 1_700_000_000;

    #[test]
    fn a_token_as_the_cli_makes_it_passes_until_fifteen_minutes_after_it_was_signed() {
        let call = check_token(&token(GOOD), "aws", SIGNED_AT + 60).unwrap();
        assert_eq!(call.host, "sts.us-west-2.amazonaws.com");
        assert_eq!(call.access_key_id, "AKIDEXAMPLE");
        assert_eq!(call.signature, "11ae");
        assert_eq!(call.expires_at, SIGNED_AT + 900);
        assert!(check_token(&token(GOOD), "aws", SIGNED_AT + 901)
            .unwrap_err()
            .contains("expired"));
    }

    #[test]
    fn every_rule_refuses_what_it_should() {
        let now = SIGNED_AT;
        for (url, why) in [
            (GOOD.replace("https://", "http://"), "https"),
            (
                GOOD.replace("sts.us-west-2.amazonaws.com", "sts.evil.example"),
                "not to an STS",
            ),
            (
                GOOD.replace(
                    "sts.us-west-2.amazonaws.com",
                    "sts.cn-north-1.amazonaws.com.cn",
                ),
                "not to an STS",
            ),
            (GOOD.replace(".com/?", ".com/x?"), "path"),
            (
                GOOD.replace("GetCallerIdentity", "GetSessionToken"),
                "GetCallerIdentity",
            ),
            (GOOD.replace("host%3Bx-k8s-aws-id", "host"), "x-k8s-aws-id"),
            (
                GOOD.replace("X-Amz-Expires=60", "X-Amz-Expires=3600"),
                "X-Amz-Expires",
            ),
            (format!("{GOOD}&Extra=1"), "parameter `extra`"),
            (format!("{GOOD}&Action=GetCallerIdentity"), "repeats"),
            (GOOD.replace("20231114T221320Z", "yesterday"), "X-Amz-Date"),
        ] {
            let err = check_token(&token(&url), "aws", now).unwrap_err();
            assert!(err.contains(why), "{url}: {err}");
        }
        assert!(check_token("Bearer x", "aws", now)
            .unwrap_err()
            .contains("k8s-aws-v1."));
        assert!(check_token(&"k".repeat(5000), "aws", now)
            .unwrap_err()
            .contains("4 KiB"));
        // China's STS hosts are its partition's only.
        let cn = GOOD.replace(
            "sts.us-west-2.amazonaws.com",
            "sts.cn-north-1.amazonaws.com.cn",
        );
        assert!(check_token(&token(&cn), "aws-cn", now).is_ok());
    }

    #[test]
    fn sts_hosts_are_the_partitions() {
        for ok in [
            "sts.amazonaws.com",
            "sts.eu-west-1.amazonaws.com",
            "sts-fips.us-east-1.amazonaws.com",
        ] {
            assert!(is_sts_host("aws", ok), "{ok}");
        }
        for bad in [
            "sts.amazonaws.com.evil.example",
            "evil.sts.us-east-1.amazonaws.com",
            "sts.us-east-1.amazonaws.com:8443",
            "sts..amazonaws.com",
            "sts.us-gov-west-1.amazonaws.com",
        ] {
            assert!(!is_sts_host("aws", bad), "{bad}");
        }
        assert!(is_sts_host("aws-us-gov", "sts.us-gov-west-1.amazonaws.com"));
    }

    #[test]
    fn a_role_session_stands_for_its_role() {
        assert_eq!(
            principal_arn("arn:aws:sts::111122223333:assumed-role/Dev/alice").unwrap(),
            "arn:aws:iam::111122223333:role/Dev"
        );
        let user = "arn:aws:iam::111122223333:user/bob";
        assert_eq!(principal_arn(user).unwrap(), user);
        assert!(principal_arn("arn:aws:sts::111122223333:federated-user/x").is_err());
        assert!(principal_arn("bob").is_err());
    }
}

//! What the edge checks a request against, fixed once the listener is bound: the `Host` and
//! `Origin` values accepted (the DNS-rebinding guard) and the bearer token, compared in constant
//! time. A leaf of the server's state: the edge (`edge.rs`) applies it.

use axum::http::{header, HeaderMap};
use subtle::ConstantTimeEq;

/// What the edge checks against, fixed once the listener is bound.
#[derive(Debug, Clone)]
pub struct EdgePolicy {
    /// Accepted `Host` values (`host:port`), lowercase.
    pub hosts: Vec<String>,
    /// Accepted `Origin` values (`http://host:port`).
    pub origins: Vec<String>,
    pub token: Option<crate::config::Secret>,
}

impl EdgePolicy {
    pub fn new(
        port: u16,
        bind_ip: std::net::IpAddr,
        extra: &[String],
        token: Option<crate::config::Secret>,
    ) -> Self {
        let mut hosts: Vec<String> = vec![
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        if !bind_ip.is_unspecified() && !bind_ip.is_loopback() {
            hosts.push(match bind_ip {
                std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                v4 => format!("{v4}:{port}"),
            });
        }
        hosts.extend(
            extra
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty()),
        );
        let origins = hosts
            .iter()
            .flat_map(|h| [format!("http://{h}"), format!("https://{h}")])
            .collect();
        Self {
            hosts,
            origins,
            token,
        }
    }

    pub(super) fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        // A browser's default port is implicit in Host; the allow-list may name it either way.
        // (Compared without a lowercased copy: this runs on every request.)
        self.hosts.iter().any(|h| {
            h.eq_ignore_ascii_case(host)
                || h.strip_suffix(":80")
                    .is_some_and(|h| h.eq_ignore_ascii_case(host))
        })
    }

    pub(super) fn origin_ok(&self, headers: &HeaderMap) -> bool {
        match headers.get(header::ORIGIN).map(|o| o.to_str()) {
            None => true,
            Some(Ok(origin)) => self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)),
            Some(Err(_)) => false,
        }
    }

    pub(super) fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        // A browser cannot send Authorization on a WebSocket; it offers the token as a
        // subprotocol instead (the server never echoes that one back).
        let offered = || {
            headers
                .get(header::SEC_WEBSOCKET_PROTOCOL)
                .and_then(|v| v.to_str().ok())?
                .split(',')
                .find_map(|p| p.trim().strip_prefix(BEARER_PROTOCOL))
        };
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(offered)
        else {
            return false;
        };
        given.as_bytes().ct_eq(expected.0.as_bytes()).into()
    }
}

/// Prefix of the WebSocket subprotocol that carries the token (`instantstart.bearer.<token>`).
pub const BEARER_PROTOCOL: &str = "instantstart.bearer.";

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn host_and_origin_are_compared_without_regard_to_case() {
        let p = EdgePolicy::new(3099, "127.0.0.1".parse().unwrap(), &[], None);
        let headers = |host: &'static str, origin: Option<&'static str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static(host));
            if let Some(o) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_static(o));
            }
            h
        };
        assert!(p.host_ok(&headers("LocalHost:3099", None)));
        assert!(p.host_ok(&headers("127.0.0.1:3099", None)));
        assert!(!p.host_ok(&headers("localhost:3098", None)));
        assert!(!p.host_ok(&headers("evil.example:3099", None)));
        assert!(p.origin_ok(&headers("localhost:3099", Some("HTTP://LOCALHOST:3099"))));
        assert!(!p.origin_ok(&headers("localhost:3099", Some("http://evil.example"))));
        // A browser's default port is implicit in Host.
        let port80 = EdgePolicy::new(80, "127.0.0.1".parse().unwrap(), &[], None);
        assert!(port80.host_ok(&headers("LOCALHOST", None)));
    }
}

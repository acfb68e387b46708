//! REST answers parsed once for the tool results built from them: an agent polling a status
//! gets the same bytes until the view changes, and parsing a 62 KB answer into a JSON tree was
//! most of what a tool call cost beside its REST handler (cloning the tree costs about half).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use serde_json::Value;

/// Answers smaller than this are parsed each time: the memo would cost more than it saves.
const FROM: usize = 8 * 1024;
/// Nor larger than this are kept: the tree is several times the bytes.
const UP_TO: usize = 256 * 1024;
/// The answers kept, newest first: an agent works on a few clusters at a time.
const KEEP: usize = 4;

/// The last few answers' bytes with their parsed trees.
#[derive(Default)]
pub struct Parsed(Mutex<VecDeque<(Bytes, Arc<Value>)>>);

impl Parsed {
    /// `bytes` as JSON (None when they are not), parsed once while the same bytes come back.
    pub fn json(&self, bytes: &Bytes) -> Option<Value> {
        if !(FROM..=UP_TO).contains(&bytes.len()) {
            return serde_json::from_slice(bytes).ok();
        }
        let hit = self
            .lock()
            .iter()
            .find(|(seen, _)| seen == bytes)
            .map(|(_, tree)| tree.clone());
        if let Some(tree) = hit {
            return Some(Value::clone(&tree));
        }
        let tree: Value = serde_json::from_slice(bytes).ok()?;
        let mut kept = self.lock();
        kept.push_front((bytes.clone(), Arc::new(tree.clone())));
        kept.truncate(KEEP);
        Some(tree)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Bytes, Arc<Value>)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(n: usize, tag: &str) -> Bytes {
        let nodes: Vec<_> = (0..n)
            .map(|i| serde_json::json!({"name": format!("{tag}-{i}"), "ready": true}))
            .collect();
        Bytes::from(serde_json::to_vec(&serde_json::json!({ "nodes": nodes })).unwrap())
    }

    #[test]
    fn the_same_bytes_are_parsed_once_and_other_bytes_again() {
        let parsed = Parsed::default();
        let a = answer(400, "a");
        assert!(a.len() >= FROM);
        let first = parsed.json(&a).unwrap();
        assert_eq!(first["nodes"][399]["name"], "a-399");
        // Equal bytes from another allocation: the kept tree, equal to a fresh parse.
        let again = Bytes::from(a.to_vec());
        assert_eq!(parsed.json(&again).unwrap(), first);
        assert_eq!(parsed.lock().len(), 1);
        // A changed answer is parsed, not confused with the kept one.
        let b = answer(400, "b");
        assert_eq!(parsed.json(&b).unwrap()["nodes"][0]["name"], "b-0");
        // Only the newest few are kept; small and invalid answers are not kept at all.
        for tag in ["c", "d", "e", "f"] {
            parsed.json(&answer(400, tag)).unwrap();
        }
        assert_eq!(parsed.lock().len(), KEEP);
        assert_eq!(
            parsed.json(&Bytes::from_static(b"{\"ok\":true}")).unwrap()["ok"],
            true
        );
        let mut broken = a.to_vec();
        broken.truncate(a.len() - 1);
        assert!(parsed.json(&Bytes::from(broken)).is_none());
        assert_eq!(parsed.lock().len(), KEEP);
    }
}

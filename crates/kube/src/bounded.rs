//! What a workload sends the control plane, read bounded: a followed log line by line, each
//! held to its cap, and a model server's answer up to its cap. A workload writes what it likes;
//! the process must not grow with it.

use serde_json::Value;

use super::k8s_err;
use cloud::{CloudError, CloudResult};

/// The most of a model server's answer the control plane reads: a workload answers what it
/// likes, and the answer is held whole in memory before it is relayed.
pub const MAX_SERVICE_ANSWER: usize = 4 * 1024 * 1024;

/// A service's answer through the API server's proxy, read up to [`MAX_SERVICE_ANSWER`] bytes
/// (a longer one is refused as it arrives, never buffered whole), as JSON.
pub(super) async fn bounded_answer(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
) -> CloudResult<Value> {
    use futures::AsyncReadExt as _;
    let op = "ServiceProxy";
    // The API server's errors (a service without endpoints) come back as its Status.
    let body = client
        .request_stream(request)
        .await
        .map_err(|e| k8s_err(op, e))?;
    let mut bytes = Vec::new();
    body.take(MAX_SERVICE_ANSWER as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| CloudError::new("k8s", op, "StreamBroken", e.to_string()).retryable())?;
    if bytes.len() > MAX_SERVICE_ANSWER {
        return Err(CloudError::new(
            "k8s",
            op,
            "AnswerTooLarge",
            format!(
                "the server's answer is longer than {} MiB: it is not relayed",
                MAX_SERVICE_ANSWER >> 20
            ),
        ));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| CloudError::new("k8s", op, "Decode", format!("the answer is not JSON: {e}")))
}

/// The lines of a followed log, each held to [`cloud::MAX_LOG_LINE`] bytes: the rest of
/// a longer line is read and dropped as it arrives (never buffered), and the line says so.
pub(super) fn bounded_lines<R>(reader: R) -> impl futures::Stream<Item = std::io::Result<String>>
where
    R: futures::AsyncBufRead + Unpin,
{
    use futures::AsyncBufReadExt as _;
    let max = cloud::MAX_LOG_LINE;
    futures::stream::try_unfold(reader, move |mut r| async move {
        let mut line: Vec<u8> = Vec::new();
        let (mut cut, mut any) = (false, false);
        loop {
            let buf = r.fill_buf().await?;
            if buf.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let end = buf.iter().position(|b| *b == b'\n');
            let chunk = &buf[..end.unwrap_or(buf.len())];
            let room = max.saturating_sub(line.len());
            cut |= chunk.len() > room;
            line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            let used = end.map_or(buf.len(), |e| e + 1);
            r.consume_unpin(used);
            if end.is_some() {
                break;
            }
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let mut text = String::from_utf8_lossy(&line).into_owned();
        if cut {
            text.push_str(cloud::CUT_NOTE);
        }
        Ok(Some((text, r)))
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    #[tokio::test]
    async fn a_followed_line_is_held_to_its_cap_and_the_next_one_is_whole() {
        let huge = "x".repeat(3 * cloud::MAX_LOG_LINE);
        let text = format!("first\r\n{huge}\nlast");
        let lines: Vec<String> = super::bounded_lines(futures::io::Cursor::new(text.into_bytes()))
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1].len(), cloud::MAX_LOG_LINE + cloud::CUT_NOTE.len());
        assert!(lines[1].ends_with(cloud::CUT_NOTE));
        assert_eq!(lines[2], "last");
    }
}

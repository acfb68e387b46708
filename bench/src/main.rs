//! The benchmark's sequential client: plain HTTP/1.1 GETs against one loopback server, one
//! request per new connection, one at a time (what wrk, which runs the load figures, does not
//! measure), so the figures measure the server and not a client library.
//!
//! `seq <host:port> <path> <count> [header]`: prints `p50_ms p99_ms`.
//! `burst <host:port> <path> <file>`: one POST per line of `file` (a JSON body), each on its own
//! connection, all connected first and then sent at once; prints one `status ms answer` line per
//! request (the answer's body on one line), so a burst is timed without the client's queueing.
//! `floor <port>`: serves `200 ok` to every request on 127.0.0.1:`port` with two worker threads
//! (as the server has here) and does nothing else, so wrk against it shows what this machine's
//! scheduler and loopback cost before any server does any work: the floor of every latency.
//! `floor-axum <port>`: `GET /healthz` answered `ok` by axum over hyper (HTTP/1.1), served as the
//! server serves (`into_make_service`, two workers, no Nagle) with no layer and no state: the
//! floor of any server built on that stack, so `/healthz` can be read against it.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one request on `s` and reads the whole response; returns its status and body size.
async fn one(s: &mut TcpStream, req: &[u8], buf: &mut Vec<u8>) -> std::io::Result<(u16, usize)> {
    s.write_all(req).await?;
    buf.clear();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status: u16 = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((status, len))
}

fn request(addr: &str, path: &str, header: Option<&str>, close: bool) -> Vec<u8> {
    let extra = header.map(|h| format!("{h}\r\n")).unwrap_or_default();
    let conn = if close { "close" } else { "keep-alive" };
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: {conn}\r\n{extra}\r\n").into_bytes()
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The `floor` mode: a keep-alive HTTP/1.1 responder that answers each request (a read that
/// ends a head; wrk does not pipeline) with the same two bytes.
async fn floor(port: u16) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    println!("READY");
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            s.set_nodelay(true).ok();
            let mut buf = [0u8; 8192];
            let mut head = Vec::new();
            while let Ok(n @ 1..) = s.read(&mut buf).await {
                head.extend_from_slice(&buf[..n]);
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    head.clear();
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if s.write_all(ok).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
}

/// The `floor-axum` mode.
async fn floor_axum(port: u16) {
    use axum::serve::ListenerExt as _;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind")
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    println!("READY");
    let serving = axum::serve(listener, app.into_make_service());
    tokio::spawn(async move { serving.await })
        .await
        .expect("serve")
        .expect("serve");
}

#[tokio::main(worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "floor" {
        return floor(args[2].parse().expect("port")).await;
    }
    if args.len() == 3 && args[1] == "floor-axum" {
        return floor_axum(args[2].parse().expect("port")).await;
    }
    let usage =
        "usage: loadgen seq <host:port> <path> <count> [header] | burst <host:port> <path> <file> \
         | floor <port> | floor-axum <port>";
    if args.len() < 5 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let (mode, addr, path) = (args[1].as_str(), args[2].clone(), args[3].clone());
    let header = args.get(5).cloned();
    match mode {
        "seq" => {
            let count: usize = args[4].parse().expect("count");
            let req = request(&addr, &path, header.as_deref(), true);
            let mut buf = Vec::new();
            let mut times = Vec::with_capacity(count);
            for _ in 0..count {
                let t = Instant::now();
                let mut s = TcpStream::connect(&addr).await.expect("connect");
                s.set_nodelay(true).ok();
                let (status, _) = one(&mut s, &req, &mut buf).await.expect("response");
                assert!(status == 200 || status == 304, "status {status}");
                times.push(t.elapsed());
            }
            times.sort();
            println!("{:.3} {:.3}", pct(&times, 0.5), pct(&times, 0.99));
        }
        "burst" => {
            let bodies: Vec<String> = std::fs::read_to_string(&args[4])
                .expect("bodies file")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect();
            let go = std::sync::Arc::new(tokio::sync::Barrier::new(bodies.len()));
            let mut tasks = Vec::new();
            for body in bodies {
                let (addr, path, go) = (addr.clone(), path.clone(), go.clone());
                tasks.push(tokio::spawn(async move {
                    let mut s = TcpStream::connect(&addr).await.expect("connect");
                    s.set_nodelay(true).ok();
                    let req = format!(
                        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    go.wait().await;
                    let t = Instant::now();
                    let mut buf = Vec::new();
                    let (status, len) = one(&mut s, req.as_bytes(), &mut buf).await.expect("response");
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    let answer = String::from_utf8_lossy(&buf[buf.len() - len..]).replace('\n', " ");
                    (status, ms, answer)
                }));
            }
            for t in tasks {
                let (status, ms, answer) = t.await.expect("task");
                println!("{status} {ms:.3} {answer}");
            }
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

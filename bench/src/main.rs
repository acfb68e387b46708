//! The benchmark's load generator: plain HTTP/1.1 GETs against one loopback server, so the
//! figures measure the server and not a client library.
//!
//! `seq <host:port> <path> <count> [header]`: one request per new connection, one at a time;
//! prints `p50_ms p99_ms`.
//! `load <host:port> <path> <connections> <seconds> [header]`: keep-alive connections sending
//! back to back; prints `req_per_s p50_ms p99_ms bytes_per_response`.

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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: loadgen seq <host:port> <path> <count> [header] | load <host:port> <path> <connections> <seconds> [header]";
    if args.len() < 5 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let (mode, addr, path) = (args[1].as_str(), args[2].clone(), args[3].clone());
    let header = args
        .get(6)
        .or(if mode == "seq" { args.get(5) } else { None })
        .cloned();
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
        "load" => {
            let conns: usize = args[4].parse().expect("connections");
            let secs: f64 = args[5].parse().expect("seconds");
            let until = Instant::now() + Duration::from_secs_f64(secs);
            let req = request(&addr, &path, header.as_deref(), false);
            let mut tasks = Vec::new();
            let started = Instant::now();
            for _ in 0..conns {
                let (addr, req) = (addr.clone(), req.clone());
                tasks.push(tokio::spawn(async move {
                    let mut s = TcpStream::connect(&addr).await.expect("connect");
                    s.set_nodelay(true).ok();
                    let (mut buf, mut times, mut bytes) = (Vec::new(), Vec::new(), 0usize);
                    while Instant::now() < until {
                        let t = Instant::now();
                        let (status, len) = one(&mut s, &req, &mut buf).await.expect("response");
                        assert!(status == 200 || status == 304, "status {status}");
                        times.push(t.elapsed());
                        bytes = len;
                    }
                    (times, bytes)
                }));
            }
            let mut all = Vec::new();
            let mut bytes = 0;
            for t in tasks {
                let (times, b) = t.await.expect("task");
                all.extend(times);
                bytes = b;
            }
            let elapsed = started.elapsed().as_secs_f64();
            all.sort();
            println!(
                "{:.0} {:.3} {:.3} {bytes}",
                all.len() as f64 / elapsed,
                pct(&all, 0.5),
                pct(&all, 0.99)
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

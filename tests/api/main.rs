//! The one integration-test binary: the real server on `127.0.0.1:0` with a temp SQLite file
//! and the sandbox cloud, driven over HTTP like any client.

mod audit;
mod aws;
mod bucket;
mod costs;
mod crash;
mod crds;
mod deploy;
mod docs;
mod endpoints;
mod evidence;
mod features;
mod fuzz;
mod helpers;
mod iam;
mod imports;
mod kube;
mod layout;
mod logs;
mod mcp;
mod mlflow;
mod operations;
mod pages;
mod pipeline;
mod placement;
mod refusals;
mod releases;
mod security;
mod serving;
mod sharing;
mod spaces;
mod teams;
mod training;
mod ui;
mod validation;
mod workloads;

//! Project automation: `cargo xtask codegen [--check]`,
//! `cargo xtask check-layers`, `cargo xtask bench [--quick]`,
//! `cargo xtask coverage [--report FILE]`, `cargo xtask dist`, `cargo xtask
//! dist-test` and `cargo xtask publish-check`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a developer tool reports on the terminal"
)]

mod bench;
mod codegen;
mod coverage;
mod dist;
mod layers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};

const USAGE: &str = "usage: cargo xtask <codegen [--check] | check-layers | bench [--quick] | coverage [--report FILE] | dist [--only TRIPLE] | dist-test [--only TRIPLE] | publish-check>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["codegen"] => codegen::run(&workspace_root(), false),
        ["codegen", "--check"] => codegen::run(&workspace_root(), true),
        ["bench"] => bench::run(&workspace_root(), false),
        ["bench", "--quick"] => bench::run(&workspace_root(), true),
        ["coverage"] => coverage::run(&workspace_root(), None),
        ["coverage", "--report", report] => {
            coverage::run(&workspace_root(), Some(Path::new(report)))
        }
        ["dist"] => dist::dist(&workspace_root(), &dist::platforms(None)?),
        ["dist", "--only", triple] => {
            dist::dist(&workspace_root(), &dist::platforms(Some(triple))?)
        }
        ["dist-test"] => dist::dist_test(&workspace_root(), &dist::platforms(None)?),
        ["dist-test", "--only", triple] => {
            dist::dist_test(&workspace_root(), &dist::platforms(Some(triple))?)
        }
        ["publish-check"] => dist::publish_check(&workspace_root()),
        ["check-layers"] => {
            let report = layers::check_workspace(&workspace_root()).context("checking layers")?;
            println!("{report}");
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

/// The workspace root: the parent of this crate's directory.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

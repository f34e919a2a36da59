//! Declares `cfg(tokio_unstable)`, which the quorum simulation
//! (`tests/simulation`) checks to seed tokio's own generator: built with
//! `--cfg tokio_unstable` (the workspace's `.cargo/config.toml` sets it), a
//! simulated seed replays exactly.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
}

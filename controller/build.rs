//! Declares `cfg(tokio_unstable)`, which the quorum simulation
//! (`tests/simulation`) checks to seed tokio's own generator: built with
//! `RUSTFLAGS="--cfg tokio_unstable"`, a simulated seed replays exactly.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
}

//! cargo-afl entry point of the `quorum_frame` fuzz target
//! (`weir_controller::fuzz::fuzz_quorum_frame`); built and run by `scripts/fuzz`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        weir_controller::fuzz::fuzz_quorum_frame(data);
    });
}

//! cargo-afl entry point of the `metadata_log` fuzz target
//! (`weir_controller::fuzz::fuzz_metadata_log`); built and run by `scripts/fuzz`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        weir_controller::fuzz::fuzz_metadata_log(data);
    });
}

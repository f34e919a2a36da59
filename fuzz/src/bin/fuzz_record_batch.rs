//! cargo-afl entry point of the `record_batch` fuzz target
//! (`weir_storage::fuzz::fuzz_record_batch`); built and run by `scripts/fuzz`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        weir_storage::fuzz::fuzz_record_batch(data);
    });
}

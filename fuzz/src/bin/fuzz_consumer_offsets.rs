//! cargo-afl entry point of the `consumer_offsets` fuzz target
//! (`weir_broker::fuzz::fuzz_consumer_offsets`); built and run by `scripts/fuzz`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        weir_broker::fuzz::fuzz_consumer_offsets(data);
    });
}

//! cargo-afl entry point of the `request` fuzz target
//! (`weir_protocol_compat::fuzz::fuzz_request`); built and run by `scripts/fuzz`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        weir_protocol_compat::fuzz::fuzz_request(data);
    });
}

//! Replays every committed corpus input, every regression input and every
//! freshly generated seed through its fuzz target on plain `cargo test`, so
//! CI checks the corpus without AFL++ installed. One test, so the heap
//! measured for an input is that input's alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use weir_fuzz::{corpus_dir, read_inputs, regressions_dir, MAX_HEAP_BYTES_PER_INPUT, TARGETS};

/// The system allocator, counting the bytes live now and the most live
/// since the last [`PeakAllocator::reset_peak`].
struct PeakAllocator {
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl PeakAllocator {
    fn reset_peak(&self) -> usize {
        let live = self.live.load(Ordering::SeqCst);
        self.peak.store(live, Ordering::SeqCst);
        live
    }

    fn grown(&self, bytes: usize) {
        let live = self.live.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(live, Ordering::SeqCst);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// bookkeeping only.
unsafe impl GlobalAlloc for PeakAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grown(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            if new_size >= layout.size() {
                self.grown(new_size - layout.size());
            } else {
                self.live
                    .fetch_sub(layout.size() - new_size, Ordering::SeqCst);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: PeakAllocator = PeakAllocator {
    live: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
};

/// Every input of every target runs without a panic and holds at most
/// `MAX_HEAP_BYTES_PER_INPUT` of heap at once; every target has a committed
/// corpus that holds each seed its encoders generate today (by name; `cargo
/// run -p weir-fuzz -- seeds` rewrites them).
#[test]
fn every_corpus_input_runs_without_panic_within_the_heap_bound() {
    let mut inputs_run = 0;
    for target in TARGETS {
        let corpus = read_inputs(&corpus_dir(target.name)).unwrap();
        assert!(!corpus.is_empty(), "{}: empty corpus", target.name);
        let generated = (target.seeds)();
        assert!(!generated.is_empty(), "{}: no seeds", target.name);
        for (name, _) in &generated {
            assert!(
                corpus.iter().any(|(file, _)| file == name),
                "{}: seed {name} is not in the committed corpus; run `cargo run -p weir-fuzz -- seeds`",
                target.name
            );
        }
        let regressions = read_inputs(&regressions_dir(target.name)).unwrap();
        for (origin, inputs) in [
            ("corpus", &corpus),
            ("regressions", &regressions),
            ("generated", &generated),
        ] {
            for (name, bytes) in inputs {
                let before = ALLOCATOR.reset_peak();
                (target.run)(bytes);
                let peak = ALLOCATOR.peak.load(Ordering::SeqCst).saturating_sub(before);
                assert!(
                    peak <= MAX_HEAP_BYTES_PER_INPUT,
                    "{} {origin}/{name}: {peak} bytes of heap",
                    target.name
                );
                inputs_run += 1;
            }
        }
    }
    assert!(inputs_run > 200, "only {inputs_run} inputs");
}

//! `weir-fuzz`: the fuzz crate's helper command (no AFL++ needed).
//!
//! ```text
//! weir-fuzz seeds                      write every target's generated seeds into fuzz/corpus/<target>/
//! weir-fuzz replay <target> <file>...  run inputs through a target (a panic shows its message)
//! weir-fuzz list                       print the target names
//! ```

use std::process::ExitCode;

use weir_fuzz::{corpus_dir, target, TARGETS};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("seeds") => {
            for t in TARGETS {
                let dir = corpus_dir(t.name);
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    eprintln!("{}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
                let seeds = (t.seeds)();
                for (name, bytes) in &seeds {
                    if let Err(e) = std::fs::write(dir.join(name), bytes) {
                        eprintln!("{}: {e}", dir.join(name).display());
                        return ExitCode::FAILURE;
                    }
                }
                println!("{}: {} seeds in {}", t.name, seeds.len(), dir.display());
            }
            ExitCode::SUCCESS
        }
        Some("replay") if args.len() >= 3 => {
            let Some(t) = target(&args[1]) else {
                eprintln!("unknown target {}", args[1]);
                return ExitCode::FAILURE;
            };
            for file in &args[2..] {
                match std::fs::read(file) {
                    Ok(bytes) => {
                        (t.run)(&bytes);
                        println!("{file}: no panic");
                    }
                    Err(e) => {
                        eprintln!("{file}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Some("list") => {
            for t in TARGETS {
                println!("{}", t.name);
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: weir-fuzz seeds | replay <target> <file>... | list");
            ExitCode::FAILURE
        }
    }
}

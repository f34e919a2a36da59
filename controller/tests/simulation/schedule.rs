//! The simulation's schedule: a pure function of the seed. It fixes the
//! number of voters, the client commands (which topic, through which voter)
//! and the faults (partitions, cut links, message loss and delay, crashes
//! and restarts), and the simulated time between them. Two faults that
//! depend on who leads at that moment ([`Step::IsolateLeader`],
//! [`Step::CrashLeader`]) name their target only at run time.

/// A small seeded generator (splitmix64, Steele, Lea and Flood), so that a
/// schedule depends on nothing but its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A client command, sent through one voter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i16,
    },
    DeleteTopic {
        name: String,
    },
    /// Grow the topic to `count` partitions in total.
    CreatePartitions {
        name: String,
        count: i32,
    },
}

/// One step of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send `op` through voter `via` without waiting for its answer (the
    /// next running voter if `via` is down).
    Command { via: i32, op: Op },
    /// Let `ms` milliseconds of simulated time pass.
    Wait { ms: u64 },
    /// Cut these voters off from every other voter.
    Isolate(Vec<i32>),
    /// Cut off whichever voter leads now (if any).
    IsolateLeader,
    /// Cut the link between two voters (both still reach the others).
    CutLink(i32, i32),
    /// Undo every isolation and cut link.
    HealAll,
    /// Lose each message with this probability in 1/1000.
    SetLoss(u32),
    /// Delay each message by up to this many milliseconds.
    SetMaxDelay(u64),
    /// Stop these voters (their directories stay).
    Crash(Vec<i32>),
    /// Stop whichever voter leads now (if any).
    CrashLeader,
    /// Start every stopped voter again from its directory.
    RestartStopped,
}

/// A simulation run's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Voter ids, `1..=n`.
    pub voters: Vec<i32>,
    pub steps: Vec<Step>,
}

/// Topic names commands pick from: few, so creates collide with existing
/// topics and deleted names are created again.
const TOPICS: [&str; 6] = ["t0", "t1", "t2", "t3", "t4", "t5"];

impl Schedule {
    /// The schedule for `seed`: 3 voters (5 for one seed in four), then
    /// 5 to 8 episodes. An episode may change message loss and delay,
    /// starts at most one kind of fault touching a minority of the voters,
    /// sends 1 to 6 commands while it lasts, then heals the partitions and
    /// restarts stopped voters (loss and delay are cleared half the time).
    pub fn generate(seed: u64) -> Schedule {
        let mut rng = Rng::new(seed);
        let count = if rng.below(4) == 0 { 5 } else { 3 };
        let voters: Vec<i32> = (1..=count).collect();
        let minority = |rng: &mut Rng| -> Vec<i32> {
            let size = 1 + rng.below(((count - 1) / 2) as u64) as usize;
            let mut chosen = Vec::new();
            while chosen.len() < size {
                let v = rng.pick(&voters);
                if !chosen.contains(&v) {
                    chosen.push(v);
                }
            }
            chosen
        };
        let mut steps = Vec::new();
        let episodes = 5 + rng.below(4);
        for _ in 0..episodes {
            if rng.chance(500) {
                steps.push(Step::SetLoss(rng.below(150) as u32));
                steps.push(Step::SetMaxDelay(rng.below(40)));
            }
            match rng.below(7) {
                0 => {}
                1 => steps.push(Step::Isolate(minority(&mut rng))),
                2 => steps.push(Step::IsolateLeader),
                3 => {
                    let a = rng.pick(&voters);
                    let b = loop {
                        let b = rng.pick(&voters);
                        if b != a {
                            break b;
                        }
                    };
                    steps.push(Step::CutLink(a, b));
                }
                4 => steps.push(Step::Crash(minority(&mut rng))),
                _ => steps.push(Step::CrashLeader),
            }
            for _ in 0..1 + rng.below(6) {
                let via = rng.pick(&voters);
                let name = rng.pick(&TOPICS).to_string();
                let op = match rng.below(10) {
                    0..=4 => Op::CreateTopic {
                        name,
                        partitions: 1 + rng.below(3) as i32,
                        replication_factor: 1 + rng.below(3) as i16,
                    },
                    5..=7 => Op::DeleteTopic { name },
                    _ => Op::CreatePartitions {
                        name,
                        count: 2 + rng.below(5) as i32,
                    },
                };
                steps.push(Step::Command { via, op });
                steps.push(Step::Wait { ms: rng.below(300) });
            }
            steps.push(Step::Wait {
                ms: rng.below(3000),
            });
            steps.push(Step::HealAll);
            steps.push(Step::RestartStopped);
            if rng.chance(500) {
                steps.push(Step::SetLoss(0));
                steps.push(Step::SetMaxDelay(0));
            }
            steps.push(Step::Wait {
                ms: rng.below(1500),
            });
        }
        Schedule { voters, steps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_a_function_of_its_seed() {
        assert_eq!(Schedule::generate(7), Schedule::generate(7));
        assert_ne!(Schedule::generate(7), Schedule::generate(8));
        for seed in 0..50 {
            let s = Schedule::generate(seed);
            let majority = s.voters.len() / 2 + 1;
            for step in &s.steps {
                if let Step::Isolate(v) | Step::Crash(v) = step {
                    assert!(
                        !v.is_empty() && s.voters.len() - v.len() >= majority,
                        "{step:?}"
                    );
                }
            }
        }
    }
}

//! [`ChaosNetwork`]: the network the chaos cluster runs on when a run
//! injects network faults, and the cuts ([`Partition::cuts`]) each
//! network fault makes.
//!
//! Each node runs in its own Linux network namespace
//! (`weir-chaos-<pid>-<node>`, `lo` up) with one end of a veth pair
//! (`wc<pid>n<node>`, address `10.N.M.<node>/24`); the other end
//! (`wc<pid>h<node>`) is a port of a bridge in the root namespace
//! (`wc<pid>br`, address `10.N.M.254/24`), where the harness and its
//! clients run. `N.M` follows from the harness's pid (`N` in 200..=231),
//! skipping a `/24` that an address or route of the root namespace
//! already uses, so concurrent runs do not clash.
//!
//! A cut `a -> b` is a blackhole route in `a`'s namespace
//! (`ip -n <ns of a> route add blackhole <address of b>/32`): every packet
//! `a` sends to `b` is dropped (a `connect` from `a` fails at once with
//! `EINVAL`; on an established connection the segments are dropped and
//! retransmitted until the route goes). Cuts are only between nodes; the
//! harness at `.254` reaches every node throughout, as Jepsen partitions
//! database nodes while its clients stay connected. The network faults:
//!
//! - [`Partition::Isolate`]: one node cut from both others, both ways.
//! - [`Partition::Bridge`]: the two nodes other than the middle one cannot
//!   reach each other; the middle reaches both (a non-transitive
//!   partition).
//! - [`Partition::OneWay`]: only one node's packets to the others are
//!   dropped; theirs still reach it. For TCP this blocks every connection
//!   between them in both directions (one side's SYN-ACKs or ACKs never
//!   arrive), but the node still receives the others' SYNs and the data
//!   segments they send on connections that were open, and its
//!   application reads that data (requests are processed, answers are
//!   lost).
//!
//! Links can also be degraded rather than cut ([`Degradation`], on one
//! node's links to the others, both ways):
//!
//! - [`Degradation::Loss`]: a share of the packets dropped at random, by an
//!   nftables table in the node's namespace (`numgen random mod 100 < P
//!   drop` on its input and output hooks for the other nodes' addresses).
//! - [`Degradation::Slow`]: the packets limited to a few hundred kbit/s
//!   each way by an HTB class on the sending end of each link (the node's
//!   veth for its packets, the others' veths for theirs, selected by a u32
//!   destination filter): packets queue (delay of up to seconds under
//!   replication load) and are dropped once the queue is full.
//!
//! The machine's kernel has no `sch_netem`, so there is no fixed added
//! delay and no reordering; delay comes from queueing behind the rate
//! limit. Needs root, `ip` and `tc` (iproute2) and, for loss, `nft`
//! (nftables). One `ChaosNetwork` per process at a time; creating one
//! first removes namespaces and links of this naming scheme whose owning
//! pid is no longer running (left by a killed harness).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The nodes a network has (1-based, as `node.id`).
pub const NODES: [i32; 3] = [1, 2, 3];

/// The prefix of every namespace a [`ChaosNetwork`] creates.
const NAMESPACE_PREFIX: &str = "weir-chaos-";
/// The prefix of every link (bridge, veth) a [`ChaosNetwork`] creates.
const LINK_PREFIX: &str = "wc";

/// True while a [`ChaosNetwork`] of this process exists.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// A directed cut: `from`'s packets to `to` are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cut {
    /// The node whose packets are dropped (1..=3).
    pub from: i32,
    /// The node they were addressed to (1..=3).
    pub to: i32,
}

/// One network fault on the three nodes of [`NODES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// The node is cut from both others, both ways.
    Isolate(i32),
    /// The two other nodes are cut from each other, both ways; the middle
    /// node reaches both.
    Bridge {
        /// The node that still reaches both others.
        middle: i32,
    },
    /// The node's packets to both others are dropped; theirs reach it.
    OneWay(i32),
}

impl Partition {
    /// The directed cuts this fault makes (empty for a node outside
    /// [`NODES`]).
    pub fn cuts(self) -> BTreeSet<Cut> {
        let others = |n: i32| NODES.into_iter().filter(move |o| *o != n);
        let mut cuts = BTreeSet::new();
        match self {
            Self::Isolate(n) if NODES.contains(&n) => {
                for o in others(n) {
                    cuts.insert(Cut { from: n, to: o });
                    cuts.insert(Cut { from: o, to: n });
                }
            }
            Self::Bridge { middle } if NODES.contains(&middle) => {
                let ends: Vec<i32> = others(middle).collect();
                cuts.insert(Cut {
                    from: ends[0],
                    to: ends[1],
                });
                cuts.insert(Cut {
                    from: ends[1],
                    to: ends[0],
                });
            }
            Self::OneWay(n) if NODES.contains(&n) => {
                for o in others(n) {
                    cuts.insert(Cut { from: n, to: o });
                }
            }
            _ => {}
        }
        cuts
    }
}

/// A degraded (not cut) network fault on one node's links to the other
/// nodes, both ways; the harness's own links are untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degradation {
    /// `percent` % of the packets between the node and the others dropped
    /// at random.
    Loss {
        /// The node (1..=3).
        node: i32,
        /// The share dropped, 1..=100.
        percent: u32,
    },
    /// The packets between the node and each other node limited to `kbit`
    /// kbit/s each way.
    Slow {
        /// The node (1..=3).
        node: i32,
        /// The rate, kbit/s.
        kbit: u32,
    },
}

impl Degradation {
    /// The node whose links are degraded.
    pub fn node(self) -> i32 {
        match self {
            Self::Loss { node, .. } | Self::Slow { node, .. } => node,
        }
    }
}

impl std::fmt::Display for Degradation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Loss { node, percent } => {
                write!(
                    f,
                    "{percent}% packet loss between node {node} and the others"
                )
            }
            Self::Slow { node, kbit } => {
                write!(f, "{kbit} kbit/s between node {node} and the others")
            }
        }
    }
}

/// The nftables table a [`Degradation::Loss`] adds to a namespace.
const LOSS_TABLE: &str = "weir_chaos";

/// The nftables script that drops `percent` % of the packets to and from
/// `peers`.
fn loss_rules(peers: &[String], percent: u32) -> String {
    let set = peers.join(", ");
    format!(
        "table inet {LOSS_TABLE} {{\n\
         \tchain input {{\n\t\ttype filter hook input priority 0; policy accept;\n\
         \t\tip saddr {{ {set} }} numgen random mod 100 < {percent} drop\n\t}}\n\
         \tchain output {{\n\t\ttype filter hook output priority 0; policy accept;\n\
         \t\tip daddr {{ {set} }} numgen random mod 100 < {percent} drop\n\t}}\n\
         }}\n"
    )
}

/// `a->b a->c ...`, for nemesis events.
pub fn describe(cuts: &BTreeSet<Cut>) -> String {
    cuts.iter()
        .map(|c| format!("{}->{}", c.from, c.to))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The namespaces, veth pairs and bridge of one run, and the cuts in
/// force. Dropping it removes them all.
#[derive(Debug)]
pub struct ChaosNetwork {
    pid: u32,
    subnet: (u8, u8),
    cuts: BTreeSet<Cut>,
    /// Degradations in force, and the namespaces each touched.
    degraded: Vec<Degradation>,
}

impl ChaosNetwork {
    /// Removes stale namespaces and links of dead harnesses, then creates
    /// the bridge, the three namespaces and their veth pairs.
    ///
    /// # Errors
    ///
    /// A message when another `ChaosNetwork` of this process exists, when
    /// no free subnet is found, or when an `ip` command fails (not root,
    /// iproute2 missing); what was created is removed again.
    pub fn create() -> Result<Self, String> {
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err("a ChaosNetwork of this process exists already".into());
        }
        let pid = std::process::id();
        // From here on Drop resets ACTIVE and removes what exists.
        let mut network = Self {
            pid,
            subnet: (0, 0),
            cuts: BTreeSet::new(),
            degraded: Vec::new(),
        };
        remove_stale(pid)?;
        let used = format!(
            "{}\n{}",
            ip(&["-o", "-4", "addr", "show"])?,
            ip(&["-4", "route", "show", "table", "all"])?
        );
        network.subnet = (0..64)
            .map(|attempt| subnet_for(pid, attempt))
            .find(|(n, m)| !used.contains(&format!("10.{n}.{m}.")))
            .ok_or("no free 10.N.M.0/24 subnet for the chaos network")?;
        network.build()?;
        Ok(network)
    }

    fn build(&self) -> Result<(), String> {
        let bridge = self.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.host(254)),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for node in NODES {
            let (ns, host_end, node_end) = (
                self.namespace(node),
                self.link(&format!("h{node}")),
                self.link(&format!("n{node}")),
            );
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &node_end,
            ])?;
            ip(&["link", "set", &node_end, "netns", &ns])?;
            ip(&["link", "set", &host_end, "master", &bridge])?;
            ip(&["link", "set", &host_end, "up"])?;
            let address = format!("{}/24", self.address(node));
            ip(&["-n", &ns, "addr", "add", &address, "dev", &node_end])?;
            ip(&["-n", &ns, "link", "set", &node_end, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// The network namespace `node` runs in (a name under
    /// `/var/run/netns`).
    pub fn namespace(&self, node: i32) -> String {
        format!("{NAMESPACE_PREFIX}{}-{node}", self.pid)
    }

    /// `node`'s IPv4 address, `10.N.M.<node>`.
    pub fn address(&self, node: i32) -> String {
        self.host(node)
    }

    /// The cuts in force.
    pub fn cuts(&self) -> &BTreeSet<Cut> {
        &self.cuts
    }

    /// Adds each of `cuts` that is not in force yet.
    ///
    /// # Errors
    ///
    /// The first `ip route` failure (cuts added before it stay in force
    /// and are removed by [`Self::heal`]).
    pub fn cut(&mut self, cuts: &BTreeSet<Cut>) -> Result<(), String> {
        for cut in cuts {
            if self.cuts.contains(cut) {
                continue;
            }
            let (ns, to) = (self.namespace(cut.from), self.address(cut.to));
            ip(&["-n", &ns, "route", "add", "blackhole", &format!("{to}/32")])?;
            self.cuts.insert(*cut);
        }
        Ok(())
    }

    /// Removes every cut in force.
    ///
    /// # Errors
    ///
    /// The `ip route` failures (every cut is still tried; those that
    /// failed stay recorded as in force).
    pub fn heal(&mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        for cut in std::mem::take(&mut self.cuts) {
            let (ns, to) = (self.namespace(cut.from), self.address(cut.to));
            if let Err(e) = ip(&["-n", &ns, "route", "del", "blackhole", &format!("{to}/32")]) {
                errors.push(e);
                self.cuts.insert(cut);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// The degradations in force.
    pub fn degraded(&self) -> &[Degradation] {
        &self.degraded
    }

    /// Degrades `degradation.node()`'s links to the other nodes.
    ///
    /// # Errors
    ///
    /// The first `nft` or `tc` failure (what was added is removed by
    /// [`Self::restore`]), or a node outside [`NODES`].
    pub fn degrade(&mut self, degradation: Degradation) -> Result<(), String> {
        let node = degradation.node();
        if !NODES.contains(&node) {
            return Err(format!("no node {node}"));
        }
        let peers: Vec<i32> = NODES.into_iter().filter(|n| *n != node).collect();
        self.degraded.push(degradation);
        match degradation {
            Degradation::Loss { percent, .. } => {
                let addresses: Vec<String> = peers.iter().map(|p| self.address(*p)).collect();
                let script = loss_rules(&addresses, percent.clamp(1, 100));
                run(
                    "ip",
                    &["netns", "exec", &self.namespace(node), "nft", "-f", "-"],
                    Some(&script),
                )?;
            }
            Degradation::Slow { kbit, .. } => {
                // Each sending end: the node towards every peer, every
                // peer towards the node.
                let mut ends: Vec<(i32, Vec<i32>)> = vec![(node, peers.clone())];
                ends.extend(peers.iter().map(|p| (*p, vec![node])));
                for (from, to) in ends {
                    let (ns, dev) = (self.namespace(from), self.link(&format!("n{from}")));
                    let tc = |args: &[&str]| {
                        let mut all = vec!["-n", ns.as_str()];
                        all.extend_from_slice(args);
                        run("tc", &all, None)
                    };
                    tc(&[
                        "qdisc", "add", "dev", &dev, "root", "handle", "1:", "htb", "default", "10",
                    ])?;
                    tc(&[
                        "class", "add", "dev", &dev, "parent", "1:", "classid", "1:10", "htb",
                        "rate", "10gbit",
                    ])?;
                    let rate = format!("{kbit}kbit");
                    tc(&[
                        "class", "add", "dev", &dev, "parent", "1:", "classid", "1:20", "htb",
                        "rate", &rate, "ceil", &rate,
                    ])?;
                    for peer in to {
                        let dst = format!("{}/32", self.address(peer));
                        tc(&[
                            "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "u32",
                            "match", "ip", "dst", &dst, "flowid", "1:20",
                        ])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes every degradation in force.
    ///
    /// # Errors
    ///
    /// The failures (every removal is still tried; the network is then in
    /// an unknown state and should be dropped).
    pub fn restore(&mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        for degradation in std::mem::take(&mut self.degraded) {
            let node = degradation.node();
            match degradation {
                Degradation::Loss { .. } => {
                    let ns = self.namespace(node);
                    let args = [
                        "netns", "exec", &ns, "nft", "delete", "table", "inet", LOSS_TABLE,
                    ];
                    if let Err(e) = run("ip", &args, None) {
                        errors.push(e);
                    }
                }
                Degradation::Slow { .. } => {
                    for from in NODES {
                        let (ns, dev) = (self.namespace(from), self.link(&format!("n{from}")));
                        // A peer's end may never have been set up.
                        let _ = run(
                            "tc",
                            &["-n", &ns, "qdisc", "del", "dev", &dev, "root"],
                            None,
                        );
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    fn host(&self, last: i32) -> String {
        let (n, m) = self.subnet;
        format!("10.{n}.{m}.{last}")
    }

    fn bridge(&self) -> String {
        self.link("br")
    }

    fn link(&self, suffix: &str) -> String {
        format!("{LINK_PREFIX}{}{suffix}", self.pid)
    }
}

impl Drop for ChaosNetwork {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end and so the pair.
        for node in NODES {
            let _ = ip(&["netns", "del", &self.namespace(node)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
        ACTIVE.store(false, Ordering::SeqCst);
    }
}

/// The `/24` of `pid`'s network at `attempt` (0 first): `10.N.M` with `N`
/// in 200..=231.
fn subnet_for(pid: u32, attempt: u32) -> (u8, u8) {
    let x = pid.wrapping_add(attempt) % (32 * 256);
    ((200 + x / 256) as u8, (x % 256) as u8)
}

/// The pid in the name of a namespace or link this module creates
/// (`weir-chaos-<pid>-<node>`, `wc<pid>br`, `wc<pid>h<node>`,
/// `wc<pid>n<node>`), or `None` for other names.
fn owner_pid(name: &str) -> Option<u32> {
    let digits_then = |rest: &str| -> Option<(u32, String)> {
        let end = rest.find(|c: char| !c.is_ascii_digit())?;
        Some((rest[..end].parse().ok()?, rest[end..].to_owned()))
    };
    if let Some(rest) = name.strip_prefix(NAMESPACE_PREFIX) {
        let (pid, tail) = digits_then(rest)?;
        let node = tail.strip_prefix('-')?;
        return (node.len() == 1 && node.chars().all(|c| c.is_ascii_digit())).then_some(pid);
    }
    let (pid, tail) = digits_then(name.strip_prefix(LINK_PREFIX)?)?;
    let ok = tail == "br"
        || (tail.len() == 2
            && (tail.starts_with('h') || tail.starts_with('n'))
            && tail.as_bytes()[1].is_ascii_digit());
    ok.then_some(pid)
}

/// Removes namespaces and links of this naming scheme whose owning pid is
/// not running (or is `own`: a leftover of this process).
fn remove_stale(own: u32) -> Result<(), String> {
    let stale = |pid: u32| pid == own || !std::path::Path::new(&format!("/proc/{pid}")).exists();
    for line in ip(&["netns", "list"])?.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if owner_pid(name).is_some_and(stale) {
            ip(&["netns", "del", name])?;
        }
    }
    for line in ip(&["-o", "link", "show"])?.lines() {
        // `12: wc123h1@if11: <BROADCAST,...` -> `wc123h1`
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        if owner_pid(name).is_some_and(stale) {
            // A veth end may be gone already with its peer's namespace.
            let _ = ip(&["link", "del", name]);
        }
    }
    Ok(())
}

/// Runs `ip <args>`; its stdout, or a message with its stderr.
fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args, None)
}

/// Runs `program <args>` with `stdin`; its stdout, or a message with its
/// stderr.
fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {program} (install iproute2 and nftables): {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|e| format!("{program}: writing its input: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuts(pairs: &[(i32, i32)]) -> BTreeSet<Cut> {
        pairs.iter().map(|&(from, to)| Cut { from, to }).collect()
    }

    #[test]
    fn isolate_cuts_the_node_both_ways() {
        assert_eq!(
            Partition::Isolate(2).cuts(),
            cuts(&[(2, 1), (1, 2), (2, 3), (3, 2)])
        );
    }

    #[test]
    fn bridge_cuts_only_the_two_ends() {
        assert_eq!(
            Partition::Bridge { middle: 1 }.cuts(),
            cuts(&[(2, 3), (3, 2)])
        );
        assert_eq!(
            Partition::Bridge { middle: 3 }.cuts(),
            cuts(&[(1, 2), (2, 1)])
        );
    }

    #[test]
    fn one_way_drops_only_the_nodes_own_packets() {
        assert_eq!(Partition::OneWay(3).cuts(), cuts(&[(3, 1), (3, 2)]));
    }

    #[test]
    fn a_node_outside_the_cluster_cuts_nothing() {
        for p in [
            Partition::Isolate(0),
            Partition::Bridge { middle: 4 },
            Partition::OneWay(-1),
        ] {
            assert!(p.cuts().is_empty(), "{p:?}");
        }
    }

    #[test]
    fn names_of_this_scheme_give_their_pid() {
        assert_eq!(owner_pid("weir-chaos-4194304-3"), Some(4_194_304));
        assert_eq!(owner_pid("wc123br"), Some(123));
        assert_eq!(owner_pid("wc123h1"), Some(123));
        assert_eq!(owner_pid("wc123n2"), Some(123));
        for other in [
            "eth0",
            "wcbr",
            "wc12x1",
            "weir-chaos-12",
            "docker0",
            "wc1h12",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn loss_rules_drop_a_share_of_the_peers_packets_both_ways() {
        let rules = loss_rules(&["10.1.2.2".into(), "10.1.2.3".into()], 30);
        assert!(rules.starts_with("table inet weir_chaos {"), "{rules}");
        assert!(
            rules.contains("ip saddr { 10.1.2.2, 10.1.2.3 } numgen random mod 100 < 30 drop"),
            "{rules}"
        );
        assert!(
            rules.contains("ip daddr { 10.1.2.2, 10.1.2.3 } numgen random mod 100 < 30 drop"),
            "{rules}"
        );
        assert!(rules.contains("hook input") && rules.contains("hook output"));
    }

    #[test]
    fn link_names_fit_the_kernels_limit() {
        let network = ChaosNetwork {
            pid: 4_194_304,
            subnet: (200, 0),
            cuts: BTreeSet::new(),
            degraded: Vec::new(),
        };
        for suffix in ["br", "h3", "n3"] {
            assert!(network.link(suffix).len() <= 15, "{}", network.link(suffix));
        }
        // Not created by `create`, so Drop must not reset another's flag.
        std::mem::forget(network);
    }

    #[test]
    fn subnets_stay_in_the_private_range_and_differ_by_pid() {
        for pid in [1, 255, 256, 8191, 8192, 4_194_304] {
            let (n, _) = subnet_for(pid, 0);
            assert!((200..=231).contains(&n), "{pid}");
        }
        assert_ne!(subnet_for(100, 0), subnet_for(101, 0));
        assert_eq!(subnet_for(100, 1), subnet_for(101, 0));
    }
}

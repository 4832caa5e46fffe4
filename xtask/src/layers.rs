//! `cargo xtask check-layers`: the workspace's layering, checked from
//! `cargo metadata` rather than trusted to review.
//!
//! Each crate may depend only on crates at a lower level; a few edges the
//! levels would allow are forbidden by design, and some crates must not pull
//! in certain third-party crates even transitively.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use anyhow::{Context as _, bail};
use cargo_metadata::{DependencyKind, MetadataCommand, PackageId};

/// Every workspace member and its level; a crate depends only on lower levels.
/// secret-formats is a leaf beside tool-core: level 0 keeps it free of
/// every other member, and both exec-policy (scrubbing by value) and
/// shell-runtime (redaction) may use it. spawn, the only crate allowed
/// `unsafe`, is a leaf too: shell-runtime starts processes through it, and
/// it depends on no other member.
const LEVELS: &[(&str, u8)] = &[
    ("tool-core", 0),
    ("secret-formats", 0),
    ("spawn", 0),
    ("test-support", 2),
    ("exec-policy", 1),
    ("shell-runtime", 1),
    ("egress-proxy", 1),
    ("exec-tools", 2),
    ("agent-exec", 3),
    ("xtask", 4),
];

/// Dev-only members: any member may use them as a dev-dependency (tests
/// and benchmarks), none as a normal or build dependency. They sit on the
/// level of what they themselves depend on.
const DEV_ONLY: &[&str] = &["test-support"];

/// Members that are development tooling themselves, never shipped: they may
/// use dev-only members at run time (xtask reads the benchmarks' figures
/// in test-support's format).
const TOOLING: &[&str] = &["xtask"];

/// Edges the levels would allow but the design rules out, with the reason.
const FORBIDDEN_EDGES: &[(&str, &str, &str)] = &[
    (
        "shell-runtime",
        "tool-core",
        "shell-runtime is mechanism: it knows nothing of tools and takes plain structs",
    ),
    (
        "egress-proxy",
        "tool-core",
        "egress-proxy is mechanism: the rules come from its caller's gatekeeper",
    ),
];

/// Crates a member must not need at run time, even transitively.
const FORBIDDEN_RUNTIME_DEPS: &[(&str, &str, &str)] = &[
    (
        "exec-policy",
        "tokio",
        "exec-policy is pure decisions and knows nothing of tokio",
    ),
    ("exec-policy", "nix", "exec-policy starts no process"),
    (
        "secret-formats",
        "tokio",
        "secret-formats is data and one matcher, shared by both sides",
    ),
];

/// A dependency edge between two workspace members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) to: String,
    /// `normal`, `dev` or `build`.
    pub(crate) kind: String,
}

/// What the check needs to know about the workspace.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Each member's direct edges to other members.
    pub(crate) members: BTreeMap<String, Vec<Edge>>,
    /// Each member's run-time (normal and build) dependencies, transitively, by name.
    pub(crate) runtime_closure: BTreeMap<String, BTreeSet<String>>,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation(pub(crate) String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn level(name: &str) -> Option<u8> {
    LEVELS
        .iter()
        .find(|(member, _)| *member == name)
        .map(|(_, level)| *level)
}

/// Every rule `graph` breaks, in a stable order.
pub(crate) fn check(graph: &Graph) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (from, edges) in &graph.members {
        let Some(from_level) = level(from) else {
            violations.push(Violation(format!(
                "{from}: not in the layer table; add it to LEVELS in xtask/src/layers.rs and docs/architecture.md"
            )));
            continue;
        };
        for edge in edges {
            let to = &edge.to;
            if DEV_ONLY.contains(&to.as_str()) {
                if edge.kind != "dev" && !TOOLING.contains(&from.as_str()) {
                    violations.push(Violation(format!(
                        "{from} -> {to}: {} dependency on a dev-only crate (tests and benchmarks only)",
                        edge.kind
                    )));
                }
                continue;
            }
            let Some(to_level) = level(to) else { continue };
            if to_level >= from_level {
                let direction = if to_level == from_level {
                    "sideways"
                } else {
                    "upwards"
                };
                violations.push(Violation(format!(
                    "{from} (level {from_level}) -> {to} (level {to_level}): {} dependency reaches {direction}",
                    edge.kind
                )));
            }
            for (forbidden_from, forbidden_to, reason) in FORBIDDEN_EDGES {
                if from == forbidden_from && to == forbidden_to {
                    violations.push(Violation(format!(
                        "{from} -> {to}: forbidden edge ({reason})"
                    )));
                }
            }
        }
    }
    for (member, forbidden, reason) in FORBIDDEN_RUNTIME_DEPS {
        if graph
            .runtime_closure
            .get(*member)
            .is_some_and(|deps| deps.contains(*forbidden))
        {
            violations.push(Violation(format!(
                "{member} depends on {forbidden} at run time ({reason}); see `cargo tree -p {member} -i {forbidden}`"
            )));
        }
    }
    violations
}

/// Reads the workspace at `root` and checks it; the error lists every violation.
pub(crate) fn check_workspace(root: &Path) -> anyhow::Result<String> {
    let graph = read_graph(root)?;
    let violations = check(&graph);
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(|v| format!("  {v}")).collect();
        bail!("layering violated:\n{}", lines.join("\n"));
    }
    let edges: usize = graph.members.values().map(Vec::len).sum();
    Ok(format!(
        "check-layers: {} crates, {edges} internal edges, all point down",
        graph.members.len()
    ))
}

fn read_graph(root: &Path) -> anyhow::Result<Graph> {
    let metadata = MetadataCommand::new()
        .current_dir(root)
        .exec()
        .context("running `cargo metadata`")?;
    let names: BTreeMap<&PackageId, &str> = metadata
        .packages
        .iter()
        .map(|p| (&p.id, p.name.as_str()))
        .collect();
    let members: BTreeSet<&str> = metadata
        .workspace_packages()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let mut graph = Graph::default();
    for package in metadata.workspace_packages() {
        let edges = package
            .dependencies
            .iter()
            .filter(|dep| members.contains(dep.name.as_str()))
            .map(|dep| Edge {
                to: dep.name.clone(),
                kind: match dep.kind {
                    DependencyKind::Development => "dev",
                    DependencyKind::Build => "build",
                    _ => "normal",
                }
                .to_owned(),
            })
            .collect();
        graph.members.insert(package.name.to_string(), edges);
    }
    let resolve = metadata
        .resolve
        .as_ref()
        .context("`cargo metadata` gave no dependency graph")?;
    let nodes: BTreeMap<&PackageId, _> = resolve.nodes.iter().map(|n| (&n.id, n)).collect();
    for package in metadata.workspace_packages() {
        let mut seen = BTreeSet::new();
        let mut stack = vec![&package.id];
        while let Some(id) = stack.pop() {
            let Some(node) = nodes.get(id) else { continue };
            for dep in &node.deps {
                let runtime = dep
                    .dep_kinds
                    .iter()
                    .any(|k| matches!(k.kind, DependencyKind::Normal | DependencyKind::Build));
                if runtime && seen.insert(&dep.pkg) {
                    stack.push(&dep.pkg);
                }
            }
        }
        let closure = seen
            .into_iter()
            .filter_map(|id| names.get(id))
            .map(|n| (*n).to_owned())
            .collect();
        graph
            .runtime_closure
            .insert(package.name.to_string(), closure);
    }
    Ok(graph)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(to: &str, kind: &str) -> Edge {
        Edge {
            to: to.into(),
            kind: kind.into(),
        }
    }

    /// The intended shape of the workspace.
    fn good_graph() -> Graph {
        let mut graph = Graph::default();
        graph.members.insert("tool-core".into(), vec![]);
        graph.members.insert("secret-formats".into(), vec![]);
        graph
            .members
            .insert("exec-policy".into(), vec![edge("secret-formats", "normal")]);
        graph.members.insert(
            "shell-runtime".into(),
            vec![edge("secret-formats", "normal")],
        );
        graph.members.insert(
            "exec-tools".into(),
            vec![
                edge("tool-core", "normal"),
                edge("exec-policy", "normal"),
                edge("shell-runtime", "normal"),
                edge("secret-formats", "normal"),
            ],
        );
        graph.members.insert(
            "agent-exec".into(),
            vec![edge("exec-tools", "normal"), edge("tool-core", "normal")],
        );
        graph
            .members
            .insert("xtask".into(), vec![edge("exec-tools", "normal")]);
        graph
            .runtime_closure
            .insert("exec-policy".into(), ["regex".to_owned()].into());
        graph
    }

    #[test]
    fn intended_shape_passes() {
        assert_eq!(check(&good_graph()), []);
    }

    #[test]
    fn secret_formats_is_a_leaf() {
        for member in ["tool-core", "exec-policy"] {
            let mut graph = good_graph();
            graph
                .members
                .get_mut("secret-formats")
                .unwrap()
                .push(edge(member, "normal"));
            let violations = check(&graph);
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert!(
                violations[0].0.starts_with("secret-formats (level 0) -> "),
                "{violations:?}"
            );
        }
    }

    #[test]
    fn test_support_is_a_dev_dependency_only() {
        let mut graph = good_graph();
        graph
            .members
            .insert("test-support".into(), vec![edge("tool-core", "normal")]);
        for member in ["tool-core", "shell-runtime", "xtask"] {
            graph
                .members
                .get_mut(member)
                .unwrap()
                .push(edge("test-support", "dev"));
        }
        assert_eq!(check(&graph), []);
        // xtask is tooling: it may read test-support's types at run time.
        graph
            .members
            .get_mut("xtask")
            .unwrap()
            .push(edge("test-support", "normal"));
        assert_eq!(check(&graph), []);
        graph
            .members
            .get_mut("exec-policy")
            .unwrap()
            .push(edge("test-support", "normal"));
        assert_eq!(
            check(&graph),
            [Violation(
                "exec-policy -> test-support: normal dependency on a dev-only crate (tests and benchmarks only)"
                    .into()
            )]
        );
    }

    #[test]
    fn sideways_edge_is_caught_and_named() {
        let mut graph = good_graph();
        graph
            .members
            .get_mut("exec-policy")
            .unwrap()
            .push(edge("shell-runtime", "normal"));
        assert_eq!(
            check(&graph),
            [Violation(
                "exec-policy (level 1) -> shell-runtime (level 1): normal dependency reaches sideways".into()
            )]
        );
    }

    #[test]
    fn upward_dev_edge_is_caught() {
        let mut graph = good_graph();
        graph
            .members
            .get_mut("tool-core")
            .unwrap()
            .push(edge("exec-tools", "dev"));
        assert_eq!(
            check(&graph),
            [Violation(
                "tool-core (level 0) -> exec-tools (level 2): dev dependency reaches upwards"
                    .into()
            )]
        );
    }

    #[test]
    fn forbidden_edge_is_caught_even_when_levels_allow_it() {
        let mut graph = good_graph();
        graph
            .members
            .get_mut("shell-runtime")
            .unwrap()
            .push(edge("tool-core", "normal"));
        let violations = check(&graph);
        assert_eq!(violations.len(), 1);
        assert!(
            violations[0]
                .0
                .starts_with("shell-runtime -> tool-core: forbidden edge"),
            "{violations:?}"
        );
    }

    #[test]
    fn transitive_tokio_in_exec_policy_is_caught() {
        let mut graph = good_graph();
        graph
            .runtime_closure
            .get_mut("exec-policy")
            .unwrap()
            .insert("tokio".into());
        let violations = check(&graph);
        assert_eq!(violations.len(), 1);
        assert!(
            violations[0]
                .0
                .starts_with("exec-policy depends on tokio at run time"),
            "{violations:?}"
        );
    }

    #[test]
    fn unknown_member_must_be_placed() {
        let mut graph = good_graph();
        graph.members.insert("newcomer".into(), vec![]);
        let violations = check(&graph);
        assert_eq!(violations.len(), 1);
        assert!(
            violations[0]
                .0
                .starts_with("newcomer: not in the layer table"),
            "{violations:?}"
        );
    }

    /// The real workspace keeps its layers.
    #[test]
    fn this_workspace_passes() {
        let report = check_workspace(&crate::workspace_root()).unwrap();
        let members = crate::workspace_root()
            .join("crates")
            .read_dir()
            .unwrap()
            .count()
            + 1;
        assert!(
            report.starts_with(&format!("check-layers: {members} crates")),
            "{report}"
        );
    }
}

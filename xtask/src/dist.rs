//! Release artefacts (docs/decisions/0026-release-artefacts.md): the
//! crates.io metadata check (`cargo xtask publish-check`).

use std::path::Path;

use anyhow::Context as _;
use cargo_metadata::semver::VersionReq;
use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, Package};

/// The workspace's metadata, dependencies resolved.
fn metadata(root: &Path) -> anyhow::Result<Metadata> {
    MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .exec()
        .context("cargo metadata")
}

/// Whether a package may go to crates.io: `publish = false` reads as an
/// empty registry list.
fn publishable(package: &Package) -> bool {
    package
        .publish
        .as_ref()
        .is_none_or(|registries| !registries.is_empty())
}

/// What each publishable workspace member lacks for crates.io, one line per
/// gap naming the crate: its metadata fields, and a version on every normal
/// or build dependency given by path (crates.io refuses a path-only one).
/// Path-only dev-dependencies are fine: `cargo publish` drops them.
fn publish_gaps(metadata: &Metadata) -> Vec<String> {
    let mut gaps = Vec::new();
    for package in metadata.workspace_packages() {
        if !publishable(package) {
            continue;
        }
        let name = package.name.as_str();
        let missing = [
            ("description", package.description.is_none()),
            (
                "license",
                package.license.is_none() && package.license_file.is_none(),
            ),
            ("repository", package.repository.is_none()),
            ("readme", package.readme.is_none()),
            ("keywords", package.keywords.is_empty()),
            ("categories", package.categories.is_empty()),
            ("rust-version", package.rust_version.is_none()),
        ];
        for (field, absent) in missing {
            if absent {
                gaps.push(format!("{name}: no `{field}` in Cargo.toml"));
            }
        }
        for dependency in &package.dependencies {
            if dependency.path.is_some()
                && dependency.kind != DependencyKind::Development
                && dependency.req == VersionReq::STAR
            {
                gaps.push(format!(
                    "{name}: dependency `{}` is by path only (give it a version)",
                    dependency.name
                ));
            }
        }
        for dependency in &package.dependencies {
            let unpublished = metadata
                .workspace_packages()
                .into_iter()
                .any(|member| member.name.as_str() == dependency.name && !publishable(member));
            if unpublished && dependency.kind != DependencyKind::Development {
                gaps.push(format!(
                    "{name}: depends on `{}`, which is `publish = false`",
                    dependency.name
                ));
            }
        }
    }
    gaps
}

/// `cargo xtask publish-check`: fails naming every crate that lacks what
/// crates.io needs.
pub(crate) fn publish_check(root: &Path) -> anyhow::Result<()> {
    let gaps = publish_gaps(&metadata(root)?);
    if gaps.is_empty() {
        println!("publish-check: every publishable crate has its metadata");
        return Ok(());
    }
    anyhow::bail!("crates not ready for crates.io:\n  {}", gaps.join("\n  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_metadata() -> Metadata {
        metadata(&crate::workspace_root()).expect("cargo metadata of the workspace")
    }

    #[test]
    fn every_publishable_crate_has_its_crates_io_metadata() {
        let gaps = publish_gaps(&workspace_metadata());
        assert!(
            gaps.is_empty(),
            "add these to the crates' Cargo.toml:\n{}",
            gaps.join("\n")
        );
    }

    #[test]
    fn development_crates_are_not_published() {
        let metadata = workspace_metadata();
        for member in metadata.workspace_packages() {
            let expected = !matches!(member.name.as_str(), "xtask" | "test-support");
            assert_eq!(publishable(member), expected, "{}", member.name);
        }
    }

    /// The check names a crate that lost a field or whose internal
    /// dependency lost its version.
    #[test]
    fn the_publish_check_names_what_is_missing() {
        let mut value = serde_json::to_value(workspace_metadata()).expect("metadata as JSON");
        let packages = value["packages"].as_array_mut().expect("a package list");
        for package in packages.iter_mut() {
            if package["name"] == "agent-exec" && package["source"].is_null() {
                package["description"] = serde_json::Value::Null;
                package["keywords"] = serde_json::json!([]);
                for dependency in package["dependencies"]
                    .as_array_mut()
                    .expect("dependencies")
                {
                    if dependency["name"] == "exec-tools" {
                        dependency["req"] = serde_json::json!("*");
                    }
                }
            }
        }
        let broken: Metadata = serde_json::from_value(value).expect("metadata back");
        let gaps = publish_gaps(&broken);
        assert_eq!(
            gaps,
            [
                "agent-exec: no `description` in Cargo.toml",
                "agent-exec: no `keywords` in Cargo.toml",
                "agent-exec: dependency `exec-tools` is by path only (give it a version)",
            ]
        );
    }
}

use super::*;
use crate::backend::docker::images::{arch, tier_of};

fn listed(name: &str, id: &str, layers: &[&str], size: u64, in_use: bool) -> Listed {
    Listed {
        name: name.into(),
        id: id.into(),
        size,
        layers: layers.iter().map(|l| l.to_string()).collect(),
        in_use,
    }
}

#[test]
fn kinds_by_name_agree_with_tiers() {
    let a = arch();
    for (name, kind) in [
        ("patchgrade.root.bookworm:f86f".to_string(), Kind::Root),
        (format!("patchgrade.base.py.{a}.bookworm:41e8"), Kind::Base),
        (format!("patchgrade.base.apt.{a}.bookworm:5c"), Kind::Base),
        (
            format!("patchgrade.base.pip.py3.10.{a}.bookworm:6d"),
            Kind::Base,
        ),
        (
            format!("patchgrade.base.py3.8.{a}.bookworm:9"),
            Kind::Python,
        ),
        (
            format!("patchgrade.tool.rust1.95.0.{a}.bookworm:3"),
            Kind::Toolchain,
        ),
        (format!("patchgrade.env.py3.9.{a}.bullseye:7"), Kind::Env),
        (
            format!("patchgrade.snap.{a}.django__django:0"),
            Kind::Snapshot,
        ),
        (
            format!("patchgrade.eval.{a}.django__django-11099:1"),
            Kind::Instance,
        ),
        (
            format!("127.0.0.1:5000/patchgrade.eval.{a}.x-1:t"),
            Kind::Instance,
        ),
    ] {
        assert_eq!(Kind::of(&name).map(|k| k.0), Some(kind), "{name}");
        assert_eq!(tier_of(&name), Some(kind.tier()), "{name}");
    }
    assert_eq!(Kind::of("debian:bookworm-slim"), None);
    assert_eq!(Kind::of("patchgrade.other.x:1"), None);
}

#[test]
fn repositories_of_instances_and_snapshots() {
    let none = HashMap::new();
    let of = |n: &str, ids: &HashMap<String, String>| {
        let (k, rest) = Kind::of(n).unwrap();
        repo_of(k, rest, ids)
    };
    assert_eq!(
        of("patchgrade.eval.x86_64.astral-sh__ruff-15309:1", &none).as_deref(),
        Some("astral-sh__ruff")
    );
    assert_eq!(
        of("patchgrade.snap.x86_64.django__django:1", &none).as_deref(),
        Some("django__django")
    );
    assert_eq!(of("patchgrade.env.py.x86_64.bookworm:1", &none), None);
    // An id not of SWE-bench's shape: the dataset says its repository.
    let ids = HashMap::from([("acme__w-lru1a".to_string(), "acme__w".to_string())]);
    assert_eq!(
        of("patchgrade.eval.x86_64.acme__w-lru1a:1", &ids).as_deref(),
        Some("acme__w")
    );
    assert_eq!(repo_key("Acme/W.x"), "acme__w.x");
    assert_eq!(repository("127.0.0.1:5000/a:t"), "127.0.0.1:5000/a");
    assert_eq!(repository("127.0.0.1:5000/a"), "127.0.0.1:5000/a");
}

#[test]
fn groups_count_shared_layers_once() {
    let a = arch();
    let env = format!("patchgrade.env.py.{a}.bookworm:e");
    let h = held(
        vec![
            listed(
                &format!("patchgrade.base.py.{a}.bookworm:b"),
                "1",
                &["r"],
                100,
                false,
            ),
            listed(&env, "2", &["r", "e"], 150, false),
            listed(
                &format!("patchgrade.eval.{a}.acme__w-1:t"),
                "3",
                &["r", "e", "1"],
                160,
                true,
            ),
            listed(
                &format!("patchgrade.eval.{a}.acme__w-2:t"),
                "4",
                &["r", "e", "2"],
                170,
                false,
            ),
            // A second tag of the env image adds nothing.
            listed(
                &format!("patchgrade.env.py.{a}.bookworm:z"),
                "2",
                &["r", "e"],
                150,
                false,
            ),
            listed("debian:bookworm-slim", "9", &["r"], 100, false),
            // Another repository's instance straight on the base, and an
            // env nothing is built on.
            listed(
                &format!("patchgrade.eval.{a}.other__x-1:t"),
                "5",
                &["r", "x"],
                105,
                false,
            ),
            listed(
                &format!("patchgrade.env.py3.6.{a}.bookworm:u"),
                "6",
                &["r", "u"],
                130,
                false,
            ),
        ],
        &HashMap::new(),
    );
    assert_eq!(h.len(), 7, "not ours: not listed");
    let of = |n: &str| h.iter().find(|h| h.name.starts_with(n)).unwrap();
    // The env serves acme__w alone; the base both repositories.
    assert_eq!(of(&env).repo.as_deref(), Some("acme__w"));
    assert_eq!(
        (
            of("patchgrade.base").repo.as_deref(),
            of("patchgrade.base").serves
        ),
        (None, 2)
    );
    assert_eq!(of("patchgrade.env.py3.6").serves, 0);
    let g = groups(&h);
    let inst = g.iter().find(|g| g.kind == Kind::Instance).unwrap();
    assert_eq!(
        (inst.repo.as_deref(), inst.images, inst.bytes, inst.in_use),
        (Some("acme__w"), 2, 30, 1)
    );
    let envs = g.iter().find(|g| g.kind == Kind::Env && g.serves).unwrap();
    assert_eq!(
        (envs.repo.as_deref(), envs.images, envs.bytes, envs.tier),
        (Some("acme__w"), 2, 50, "env")
    );
    let idle = g.iter().find(|g| g.kind == Kind::Env && !g.serves).unwrap();
    assert_eq!((idle.repo.as_deref(), idle.bytes), (None, 30));
    let total: u64 = g.iter().map(|g| g.bytes).sum();
    assert_eq!(total, 100 + 50 + 10 + 20 + 5 + 30);
    assert_eq!(by_kind(&g)[&Kind::Base], (1, 100));
}

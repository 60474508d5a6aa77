use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::backend::docker::images::arch;
use crate::backend::docker::inventory::builds::Build;
use crate::backend::docker::inventory::{held, Listed};

fn build(name: &str, parent: Option<&str>, seconds: f64, age: u64) -> Build {
    Build {
        name: name.into(),
        kind: Kind::of(name).unwrap().0,
        parent: parent.map(String::from),
        seconds,
        failed: false,
        when: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 - age),
    }
}

fn want(id: &str, repo: &str) -> Wanted {
    Wanted {
        id: id.into(),
        repo: repo.into(),
    }
}

#[test]
fn warm_cold_recorded_and_unknown() {
    let a = arch();
    let base = format!("patchgrade.base.py.{a}.bookworm:b");
    let env = format!("patchgrade.env.py3.9.{a}.bookworm:e");
    let snap = format!("patchgrade.snap.{a}.acme__w:s");
    let i1 = format!("patchgrade.eval.{a}.acme__w-1:t1");
    let i2 = format!("patchgrade.eval.{a}.acme__w-2:t2");
    let i3 = format!("patchgrade.eval.{a}.acme__w-3:old");
    // The engine holds the base and instance 1 (under another tag).
    let h = held(
        vec![
            Listed {
                name: base.clone(),
                id: "1".into(),
                size: 100,
                layers: vec!["r".into()],
                in_use: false,
            },
            Listed {
                name: format!("patchgrade.eval.{a}.acme__w-1:new"),
                id: "2".into(),
                size: 140,
                layers: vec!["r".into(), "x".into()],
                in_use: false,
            },
        ],
        &HashMap::new(),
    );
    let mut b = Builds::default();
    b.insert(build(&env, Some(&base), 60.0, 5));
    b.insert(build(&snap, Some(&env), 20.0, 4));
    b.insert(build(&i1, Some(&snap), 4.0, 3));
    b.insert(build(&i2, Some(&snap), 6.0, 2));
    b.insert(build(&i3, Some(&snap), 9.0, 1));
    let wanted = [
        want("acme__w-1", "acme/w"),
        want("acme__w-2", "acme/w"),
        want("acme__w-4", "acme/w"),
        want("other__x-1", "other/x"),
    ];
    let tests = |id: &str| (id == "acme__w-2").then_some(3.5);
    let plan = estimate(&wanted, Start::Engine, &h, &[], &b, tests);
    let basis: Vec<Basis> = plan.instances.iter().map(|i| i.basis).collect();
    assert_eq!(
        basis,
        [Basis::Warm, Basis::Own, Basis::Repository, Basis::Unknown]
    );
    assert_eq!(plan.instances[1].seconds, Some(6.0));
    // The mean of the latest build of each of the repository's instances.
    assert_eq!(plan.instances[2].seconds, Some((4.0 + 6.0 + 9.0) / 3.0));
    assert_eq!(plan.instances[3].seconds, None);
    // The env and the snapshot are needed once; the base is held.
    let parents: Vec<&str> = plan.parents.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(parents, [env.as_str(), snap.as_str()]);
    let w = &plan.repos[0];
    assert_eq!(
        (w.repo.as_str(), w.instances, w.warm, w.cold),
        ("acme__w", 3, 1, 2)
    );
    assert_eq!(w.parents, 2);
    assert!((w.build_seconds - (6.0 + 19.0 / 3.0 + 60.0 + 20.0)).abs() < 1e-9);
    // Disk: the held instance image's own 40 bytes per cold instance; the
    // env and snapshot are not held in any tag, so unknown.
    assert_eq!((w.bytes, w.unknown_bytes), (80, 2));
    assert_eq!((w.tests_seconds, w.unknown_tests), (3.5, 2));
    let x = &plan.repos[1];
    assert_eq!((x.cold, x.unknown_seconds, x.unknown_parents), (1, 1, 1));
    assert_eq!(plan.total.instances, 4);
    assert_eq!(plan.total.cold, 3);
    assert_eq!(
        unknown_repos(&plan).into_iter().collect::<Vec<_>>(),
        [("other__x", Basis::Unknown)]
    );
    // Only a failed build recorded: said, still no number.
    let mut failed = build(&format!("patchgrade.eval.{a}.other__x-1:f"), None, 2.0, 1);
    failed.failed = true;
    b.insert(failed);
    let plan = estimate(&wanted[3..], Start::Engine, &h, &[], &b, tests);
    assert_eq!(plan.instances[0].basis, Basis::Failed);
    assert_eq!(plan.instances[0].seconds, None);

    // From an empty engine: instance 1 is built too (its own record), and
    // the base under the env, held now, is needed as well.
    let plan = estimate(&wanted[..2], Start::Empty, &h, &[], &b, tests);
    assert_eq!(plan.total.warm, 0);
    assert_eq!(plan.instances[0].seconds, Some(4.0));
    let parents: Vec<&str> = plan.parents.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(parents, [base.as_str(), env.as_str(), snap.as_str()]);
    // The base has no build recorded: unknown seconds; its size is known.
    assert_eq!(plan.parents[0].seconds, None);
    assert_eq!(plan.parents[0].bytes, Some(100));
}

#[test]
fn a_shelved_instance_is_loaded_only_over_the_parent_it_was_shelved_on() {
    let a = arch();
    let env = format!("patchgrade.env.py3.9.{a}.bookworm:e");
    let h = held(
        vec![Listed {
            name: env.clone(),
            id: "1".into(),
            size: 100,
            layers: vec!["r".into()],
            in_use: false,
        }],
        &HashMap::new(),
    );
    let shelved = |id: &str, parent: &str| Shelved {
        name: format!("patchgrade.eval.{a}.{id}:t"),
        id: "sha256:x".into(),
        layers: vec!["r".into(), "o".into()],
        own: 1,
        parent: parent.into(),
        repo: "acme/w".into(),
        raw_bytes: 10,
        stored_bytes: 4,
        shelved_ms: 0,
    };
    let shelf = [
        shelved("acme__w-1", &env),
        shelved(
            "acme__w-2",
            &format!("patchgrade.env.py3.9.{a}.bookworm:gone"),
        ),
    ];
    let mut b = Builds::default();
    b.insert(build(
        &format!("patchgrade.eval.{a}.acme__w-2:t"),
        Some(&env),
        7.0,
        1,
    ));
    let wanted = [want("acme__w-1", "acme/w"), want("acme__w-2", "acme/w")];
    let plan = estimate(&wanted, Start::Engine, &h, &shelf, &b, |_| None);
    let basis: Vec<Basis> = plan.instances.iter().map(|i| i.basis).collect();
    assert_eq!(basis, [Basis::Shelved, Basis::Own]);
    assert_eq!(plan.instances[0].seconds, Some(0.0));
    let w = &plan.repos[0];
    assert_eq!((w.warm, w.shelved, w.cold), (1, 1, 1));
    // From an empty engine the shelf is no help: its parents are rebuilt.
    let plan = estimate(&wanted, Start::Empty, &h, &shelf, &b, |_| None);
    assert_eq!(plan.total.shelved, 0);
}

//! Python extensions compiled without debug information.
//!
//! The interpreters of the python tier are pyenv builds, whose `sysconfig`
//! flags, which every extension build takes, carry `-g`. Debug information
//! is no use to a test and costs both targets of a cold start: compiling
//! scikit-learn 0.22's `kd_tree.c` took 11.7 s with it and 7.8 s without,
//! its object 4.0 MB against 0.76 MB, the same machine code (`objdump -d`
//! of the stripped object and of the `-g0` one are identical). So the
//! setups of a Python spec (its env's installs, its snapshot's and
//! instances' `pre_install` and `install`, an eval's rebuild through the
//! caches) find the C and C++ compilers through wrappers that append `-g0`:
//! GCC's last `-g` option wins. `CFLAGS` is not the way: a build that hands
//! it whole to a configure script (matplotlib's FreeType) would lose the
//! optimisation level with it. The tests never see the wrappers.
//!
//! What wheels bring is left as it is: `strip --strip-debug` over an env's
//! new modules broke numpy 1.19.2's bundled libgfortran (auditwheel's
//! patchelf layout: "ELF load command address/offset not page-aligned").

use crate::spec::Spec;

/// Where the wrappers are written for one setup and removed after it.
pub const WRAPPERS: &str = "/tmp/patchgrade-nodebug";

/// The compilers wrapped (where the image has them).
const COMPILERS: [&str; 6] = [
    "gcc",
    "g++",
    "cc",
    "c++",
    "x86_64-linux-gnu-gcc",
    "x86_64-linux-gnu-g++",
];

/// Whether `spec`'s setups compile through the wrappers: a Python spec's
/// builds are extension modules. Other languages' builds are left as their
/// specs give them (a C project's tests may read its own debug information,
/// as crash reports with stack traces do).
pub fn applies(spec: &Spec) -> bool {
    spec.python.is_some()
}

/// The wrappers written and put first on `PATH` (before a compiler cache's
/// own wrappers go in front of them: ccache then runs these as the
/// compiler, and hashes their content: [`super::setup`]).
pub fn wrapper_lines() -> String {
    let list = COMPILERS.join(" ");
    format!(
        "mkdir -p {WRAPPERS}\n\
         for c in {list}; do if [ -x /usr/bin/$c ]; then printf '#!/bin/sh\\nexec /usr/bin/%s \"$@\" -g0\\n' $c > {WRAPPERS}/$c; chmod +x {WRAPPERS}/$c; fi; done\n\
         export PATH={WRAPPERS}:$PATH\n"
    )
}

/// The wrappers removed: nothing of them stays in the image.
pub fn wrapper_end() -> String {
    format!("rm -rf {WRAPPERS}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn bash(script: &str) -> std::process::Output {
        Command::new("bash").arg("-c").arg(script).output().unwrap()
    }

    #[test]
    fn the_wrapped_compiler_writes_no_debug_information_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        // Relocated: a test must not share /tmp's fixed path with another.
        let lines = wrapper_lines().replace(WRAPPERS, &format!("{d}/w"));
        let end = wrapper_end().replace(WRAPPERS, &format!("{d}/w"));
        let script = format!(
            "set -e\ncd {d}\necho 'int f(int x) {{ return x * 3; }}' > t.c\n\
             gcc -g -O2 -c t.c -o plain.o\n{lines}command -v gcc\ngcc -g -O2 -c t.c -o wrapped.o\n{end}\
             for o in plain wrapped; do readelf -S $o.o | grep -q debug_info && echo debug || echo none; done\n\
             objcopy --strip-debug plain.o stripped.o\n\
             cmp <(objdump -d stripped.o | tail -n +3) <(objdump -d wrapped.o | tail -n +3) && echo same code\n\
             test ! -e w && echo gone\n"
        );
        let out = bash(&script);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("{d}/w/gcc"));
        assert_eq!(
            &lines[1..],
            ["debug", "none", "same code", "gone"],
            "{text}"
        );
    }
}

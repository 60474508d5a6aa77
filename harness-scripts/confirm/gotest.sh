# patchgrade's confirmation run for `go test` (docs/audit.md, "Confirmation
# run"), in place of the spec's test command: each package's test binary
# built with `go test -c` under a random name in a fresh temporary folder
# (not `<pkg>.test` under go-build), then run from its package folder (the
# working directory `go test` gives, which tests and honest code may rely
# on) with only the FAIL_TO_PASS tests, twice in one process (-test.count=2:
# state kept between calls carries over), in a shuffled order. The worst
# status of each test over the rounds is printed last, in `go test -v`'s
# form, so the log parser (last line wins) reads it.
{
pgc_dir=$(mktemp -d /tmp/XXXXXXXXXX)
pgc_bin="$pgc_dir/$(basename "$(mktemp -u XXXXXXXXXX)")"
pgc_code=0
: > "$pgc_dir/out"
go list -f '{{.Dir}}' {{packages}} > "$pgc_dir/dirs" || pgc_code=1
while IFS= read -r pgc_pkg; do
    rm -f "$pgc_bin"
    (cd "$pgc_pkg" && go test -c -o "$pgc_bin" {{build_flags}} .) || { pgc_code=1; continue; }
    # A package without test files gives no binary.
    [ -x "$pgc_bin" ] || continue
    (cd "$pgc_pkg" && "$pgc_bin" -test.v -test.count=2 -test.shuffle=on -test.run {{run}} {{test_flags}}) 2>&1 | tee -a "$pgc_dir/out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || pgc_code=1
done < "$pgc_dir/dirs"
echo '>>>>> Confirmation: the worst status of each test over the rounds'
awk '
{ l = $0; sub(/^[ \t]+/, "", l) }
l ~ /^--- (PASS|FAIL|SKIP): / {
    s = substr(l, 5, 4); n = substr(l, 11); sub(/ \([^(]*\)$/, "", n)
    r = (s == "FAIL") ? 3 : ((s == "SKIP") ? 2 : 1)
    if (!(n in rank)) { order[++k] = n; rank[n] = 0 }
    if (r > rank[n]) { rank[n] = r; st[n] = s }
}
END { for (i = 1; i <= k; i++) printf "--- %s: %s (0.00s)\n", st[order[i]], order[i] }
' "$pgc_dir/out"
rm -rf "$pgc_dir"
(exit $pgc_code)
}

// Package licenses holds the check of every Go dependency's licence
// (licenses_test.go): coordd is Apache-2.0 (LICENSE), and each module
// that any of the repository's Go modules builds with (the main module,
// tools, bench, deploy, examples; tests included) must carry a licence
// file whose text is one that Apache-2.0 code may depend on. The list is
// committed as docs/dependency-licenses.md, and NOTICE carries the NOTICE
// files of the modules linked into the binaries coordd ships (coordd,
// coordctl), as Apache-2.0 section 4(d) asks of a redistribution. Both are
// regenerated with `go test ./internal/licenses -update`.
package licenses

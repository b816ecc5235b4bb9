// Package repocheck holds the repository-wide checks that belong to no one
// package: the core's standard-library-only rule, what each binary may
// link, the longest function allowed, and what git may track (no
// executables, no file over 1 MB). It has tests only; nothing imports it.
package repocheck

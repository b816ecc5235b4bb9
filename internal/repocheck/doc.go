// Package repocheck holds the repository-wide checks that belong to no one
// package, as tests only (nothing imports it): the core imports only the
// standard library, what each binary may link, the line between what
// ships and what tests (no product package links a test backend, the lab
// or the testing package), the longest function
// allowed, what git may track (no executables, no file over 1 MB), and
// that the Markdown documentation stays true to the repository (every
// relative link and anchor resolves, every figure of the README is the
// lab's, and its Go samples are lines of the program the tests build and
// run).
package repocheck
